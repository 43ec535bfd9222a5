"""3D copies through the runtime and driver bindings, outside any torch op: the hazard check reads their
bytes from the API calls' own parameters (pitched volumes). Each NVTX range holds one race against a torch
kernel on another stream with no wait: cudaMemcpy3DAsync reads a sub-volume of `src` while the side stream
writes it (RAW), and cuMemcpy3DAsync the same (RAW)."""
import torch
from cuda.bindings import driver, runtime

SPIN = 20_000_000
PITCH, ROWS, DEPTH = 1024, 64, 16  # src: 16 slices of 64 rows of 1 KiB
W, H, D = 512, 32, 8  # the copied box: 8 slices of 32 rows of 512 bytes
side = torch.cuda.Stream()
main = torch.cuda.current_stream()
src = torch.empty(PITCH * ROWS * DEPTH // 4, device="cuda")
dst = torch.empty(W * H * D // 4, device="cuda")
torch.cuda.synchronize()


def check(err: object) -> None:
    code = err[0] if isinstance(err, tuple) else err
    assert int(code) == 0, err


with torch.cuda.nvtx.range("runtime3d"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        src.fill_(1.0)
    with torch.cuda.nvtx.range("read"):
        p = runtime.cudaMemcpy3DParms()
        p.srcPtr = runtime.make_cudaPitchedPtr(src.data_ptr(), PITCH, PITCH, ROWS)
        p.srcPos = runtime.make_cudaPos(16, 2, 3)
        p.dstPtr = runtime.make_cudaPitchedPtr(dst.data_ptr(), W, W, H)
        p.extent = runtime.make_cudaExtent(W, H, D)
        p.kind = runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        check(runtime.cudaMemcpy3DAsync(p, main.cuda_stream))
torch.cuda.synchronize()
with torch.cuda.nvtx.range("driver3d"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        src.fill_(2.0)
    with torch.cuda.nvtx.range("read"):
        c = driver.CUDA_MEMCPY3D()
        c.srcMemoryType = driver.CUmemorytype.CU_MEMORYTYPE_DEVICE
        c.srcDevice = src.data_ptr()
        c.srcPitch, c.srcHeight, c.srcXInBytes, c.srcY, c.srcZ = PITCH, ROWS, 0, 0, 1
        c.dstMemoryType = driver.CUmemorytype.CU_MEMORYTYPE_DEVICE
        c.dstDevice = dst.data_ptr()
        c.dstPitch, c.dstHeight = W, H
        c.WidthInBytes, c.Height, c.Depth = W, H, D
        check(driver.cuMemcpy3DAsync(c, main.cuda_stream))
torch.cuda.synchronize()
print("ops_copy3d", float(dst.sum()))
