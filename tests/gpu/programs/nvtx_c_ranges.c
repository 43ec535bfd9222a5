/* NVTX ranges pushed from C (compiled by nvtx_apis_window.py, called through ctypes): the plain and
   the domain forms, push/pop and start/end, ASCII messages and a registered string. */
#include <nvtx3/nvToolsExt.h>

static nvtxDomainHandle_t domain;

static nvtxEventAttributes_t attributes(const char *message, nvtxStringHandle_t registered) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (registered) {
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = registered;
    } else {
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = message;
    }
    return a;
}

int c_push(const char *message) { return nvtxRangePushA(message); }
int c_pop(void) { return nvtxRangePop(); }
unsigned long long c_start(const char *message) { return nvtxRangeStartA(message); }
void c_end(unsigned long long id) { nvtxRangeEnd(id); }

int c_domain_push(const char *message, int registered) {
    if (!domain) domain = nvtxDomainCreateA("cext");
    nvtxEventAttributes_t a = attributes(message, registered ? nvtxDomainRegisterStringA(domain, message) : 0);
    return nvtxDomainRangePushEx(domain, &a);
}
int c_domain_pop(void) { return nvtxDomainRangePop(domain); }
