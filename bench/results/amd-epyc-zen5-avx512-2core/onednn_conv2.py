# oneDNN (PyTorch 1.13's mkldnn, v2.6.3) on small's conv 2: 16 -> 16 channels,
# kernel 11x21, stride 1x2, pad 5x10, batch 8, input [8][16][T][81].
import sys, time, torch
torch.set_num_threads(2)
torch.manual_seed(0)
for T in (150, 200):
    x = torch.randn(8, 16, T, 81, requires_grad=True)
    conv = torch.nn.Conv2d(16, 16, (11, 21), stride=(1, 2), padding=(5, 10))
    for mk in (True, False):
        torch.backends.mkldnn.enabled = mk
        for _ in range(3):
            y = conv(x); y.backward(torch.ones_like(y))
        f = b = 0.0
        n = 10
        for _ in range(n):
            t0 = time.perf_counter(); y = conv(x); t1 = time.perf_counter()
            y.backward(torch.ones_like(y)); t2 = time.perf_counter()
            f += t1 - t0; b += t2 - t1
        print(f"T={T} {'oneDNN' if mk else 'native'}: fwd {1e3*f/n:.1f} ms, bwd (dx+dw+db) {1e3*b/n:.1f} ms, out {tuple(y.shape)}")
