"""One PyTorch training job for the co-location measurements (bench/gpu-pairs/run.py).

Builds one app on synthetic data already on the device (no input pipeline, so the GPU is
what is shared), warms up, tells the orchestrator it is ready, waits for `go`, counts the
training steps it completes in `--window` seconds, writes them to `--out`, then keeps
training until `stop` so a partner never measures beside an idle GPU.
"""

import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_net(name, classes, batch, size, device):
    import torchvision

    net = getattr(torchvision.models, name)(num_classes=classes).to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, classes, (batch,), device=device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def bert_like(batch, seq, device):
    # BERT-base shape (768 wide, 12 heads), 6 layers, masked-LM head over a 30,522 vocabulary.
    vocab, d = 30522, 768
    emb = nn.Embedding(vocab, d).to(device)
    layer = nn.TransformerEncoderLayer(d, 12, 3072, batch_first=True)
    enc = nn.TransformerEncoder(layer, 6).to(device)
    head = nn.Linear(d, vocab).to(device)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    tok = torch.randint(0, vocab, (batch, seq), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        out = head(enc(emb(tok)))
        loss = F.cross_entropy(out.reshape(-1, vocab), tok.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step


def lstm_lm(batch, seq, device):
    # Zaremba et al.'s medium PTB model: 2 x 650 LSTM, 10,000 words, 35 steps.
    vocab, d = 10000, 650
    emb = nn.Embedding(vocab, d).to(device)
    rnn = nn.LSTM(d, d, 2, batch_first=True).to(device)
    head = nn.Linear(d, vocab).to(device)
    params = list(emb.parameters()) + list(rnn.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=1.0)
    tok = torch.randint(0, vocab, (batch, seq + 1), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        out, _ = rnn(emb(tok[:, :-1]))
        loss = F.cross_entropy(head(out).reshape(-1, vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step


def dcgan(batch, device):
    # Radford et al.'s 64x64 DCGAN, one discriminator and one generator step per iteration.
    nz, ngf, ndf = 100, 64, 64
    g = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
    ).to(device)
    d = nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Flatten(),
    ).to(device)
    og = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(batch, 3, 64, 64, device=device)
    ones = torch.ones(batch, 1, device=device)
    zeros = torch.zeros(batch, 1, device=device)

    def step():
        fake = g(torch.randn(batch, nz, 1, 1, device=device))
        od.zero_grad(set_to_none=True)
        ld = F.binary_cross_entropy_with_logits(d(real), ones) + F.binary_cross_entropy_with_logits(
            d(fake.detach()), zeros
        )
        ld.backward()
        od.step()
        og.zero_grad(set_to_none=True)
        lg = F.binary_cross_entropy_with_logits(d(fake), ones)
        lg.backward()
        og.step()
        return lg

    return step


# key -> (model, dataset, batch size, builder); keys follow Lucid's model-dataset-bsN-ampA.
APPS = {
    "ResNet18-CIFAR-10-bs64": ("ResNet18", "CIFAR-10", 64, lambda dev: conv_net("resnet18", 10, 64, 32, dev)),
    "ResNet50-ImageNet-bs32": ("ResNet50", "ImageNet", 32, lambda dev: conv_net("resnet50", 1000, 32, 224, dev)),
    "MobileNetV2-CIFAR-10-bs32": (
        "MobileNetV2", "CIFAR-10", 32, lambda dev: conv_net("mobilenet_v2", 10, 32, 32, dev)),
    "BERT-SQuAD-bs16": ("BERT", "SQuAD", 16, lambda dev: bert_like(16, 128, dev)),
    "LSTM-PTB-bs20": ("LSTM", "PTB", 20, lambda dev: lstm_lm(20, 35, dev)),
    "DCGAN-LSUN-bs64": ("DCGAN", "LSUN", 64, lambda dev: dcgan(64, dev)),
}


def wait_for(path, limit_s):
    end = time.time() + limit_s
    while not os.path.exists(path):
        if time.time() > end:
            raise SystemExit(f"job: gave up waiting for {path}")
        time.sleep(0.005)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True, choices=sorted(APPS))
    ap.add_argument("--sync-dir", help="where ready/go/done/stop files live")
    ap.add_argument("--id", help="this job's name in the sync files")
    ap.add_argument("--steps", type=int, help="run this many training steps and exit (no sync): a job of fixed work")
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--warmup", type=int, default=10, help="steps before ready")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    step = APPS[args.app][3](args.device)
    if args.steps is not None:
        # Fixed work: under interference it takes longer, as a real training job does.
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step().item()
        print(json.dumps({"app": args.app, "steps": args.steps, "seconds": time.perf_counter() - t0}), flush=True)
        return
    if not (args.sync_dir and args.id):
        raise SystemExit("job: --sync-dir and --id are needed without --steps")
    for _ in range(args.warmup):
        step().item()
    sync = args.sync_dir
    open(os.path.join(sync, f"ready_{args.id}"), "w").close()
    wait_for(os.path.join(sync, "go"), 120)

    # .item() every step: the host waits for each step, as a training loop that logs its loss does.
    steps, t0 = 0, time.perf_counter()
    while True:
        step().item()
        steps += 1
        dt = time.perf_counter() - t0
        if dt >= args.window:
            break
    with open(os.path.join(sync, f"done_{args.id}.tmp"), "w") as f:
        json.dump({"app": args.app, "steps": steps, "seconds": dt, "steps_per_s": steps / dt}, f)
    os.replace(os.path.join(sync, f"done_{args.id}.tmp"), os.path.join(sync, f"done_{args.id}"))
    stop = os.path.join(sync, "stop")
    end = time.time() + 120
    while not os.path.exists(stop) and time.time() < end:
        step().item()


if __name__ == "__main__":
    main()
