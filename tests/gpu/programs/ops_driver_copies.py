"""Copies and memsets made through the driver and runtime bindings, outside any torch op: the hazard
check reads their bytes from the API calls' own arguments. Each NVTX range holds one race against a
torch kernel on another stream with no wait: a 1D device-to-device copy (RAW), a pitched 2D copy
(RAW), a peer copy (RAW), and a memset while the main stream reads (WAR)."""
import torch
from cuda.bindings import driver, runtime

SPIN = 20_000_000
N = 1 << 20
side = torch.cuda.Stream()
main = torch.cuda.current_stream()
src = torch.empty(N, device="cuda")
dst = torch.empty(N, device="cuda")
x = torch.randn(N, device="cuda")
ctx = driver.cuCtxGetCurrent()[1]
torch.cuda.synchronize()


def check(err: object) -> None:
    code = err[0] if isinstance(err, tuple) else err
    assert int(code) == 0, err


with torch.cuda.nvtx.range("copy1d"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        src.fill_(1.0)
    with torch.cuda.nvtx.range("read"):
        check(driver.cuMemcpyDtoDAsync(dst.data_ptr(), src.data_ptr(), N * 4, main.cuda_stream))
torch.cuda.synchronize()
with torch.cuda.nvtx.range("copy2d"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        src.fill_(2.0)
    with torch.cuda.nvtx.range("read"):  # 256 rows of 1 KiB out of 4 KiB rows
        check(runtime.cudaMemcpy2DAsync(dst.data_ptr(), 4096, src.data_ptr(), 4096, 1024, 256,
                                        runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, main.cuda_stream))
torch.cuda.synchronize()
with torch.cuda.nvtx.range("peer"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        src.fill_(3.0)
    with torch.cuda.nvtx.range("read"):
        check(driver.cuMemcpyPeerAsync(dst.data_ptr(), ctx, src.data_ptr(), ctx, N * 4, main.cuda_stream))
torch.cuda.synchronize()
with torch.cuda.nvtx.range("memset"):
    with torch.cuda.nvtx.range("read"):
        torch.cuda._sleep(SPIN)
        y = x * 2
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        check(driver.cuMemsetD32Async(x.data_ptr(), 0, N, side.cuda_stream))
torch.cuda.synchronize()
print("ops_driver_copies", float(dst.sum()), float(y.sum()))
