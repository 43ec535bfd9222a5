"""A copy into a CUDA array (cudaMemcpy2DToArrayAsync) while another stream writes its source: the array
side has no linear byte range, so the hazard check must count the copy as not judged (with the reason),
never call the run clean."""
import torch
from cuda.bindings import runtime

side = torch.cuda.Stream()
main = torch.cuda.current_stream()
src = torch.empty(64 * 64, device="cuda")
desc = runtime.cudaCreateChannelDesc(32, 0, 0, 0, runtime.cudaChannelFormatKind.cudaChannelFormatKindFloat)
desc = desc[1] if isinstance(desc, tuple) else desc  # (error, desc) in cuda-bindings 13
err, array = runtime.cudaMallocArray(desc, 64, 64, 0)
assert int(err) == 0, err
torch.cuda.synchronize()
with torch.cuda.nvtx.range("to_array"):
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        src.fill_(1.0)
    err = runtime.cudaMemcpy2DToArrayAsync(array, 0, 0, src.data_ptr(), 256, 256, 64,
                                           runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, main.cuda_stream)
    assert int(err[0] if isinstance(err, tuple) else err) == 0, err
torch.cuda.synchronize()
runtime.cudaFreeArray(array)
print("array_copy done")
