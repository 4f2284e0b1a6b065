//! Cost of one `rates` call (the simulator makes one per GPU per step): 2 and 4 jobs, each model.
//! `cargo bench -p dqngpu-interference --bench rates`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dqngpu_interference::{Contention, Interference, JobLoad, Measured, NoInterference};
use dqngpu_model::Resources;

fn bench(c: &mut Criterion) {
    let gpu = dqngpu_model::gpu::lookup("rtx3090").unwrap_or_else(|e| panic!("{e}"));
    let d = [
        Resources::new(80.0, 4000.0, 80.0, 500.0),
        Resources::new(60.0, 3000.0, 60.0, 200.0),
        Resources::new(30.0, 1000.0, 30.0, 100.0),
        Resources::new(90.0, 5000.0, 90.0, 900.0),
    ];
    let keys = ["MobileNetV3-ImageNet-bs32-amp0", "MobileNetV2-CIFAR-10-bs32-amp0", "LSTM-Wikitext2-bs64-amp0", "x"];
    let jobs: Vec<JobLoad> = keys.iter().zip(&d).map(|(k, d)| JobLoad { app: k, demand: d }).collect();
    let measured = Measured::builtin().unwrap_or_else(|e| panic!("{e}"));
    let models: [(&str, &dyn Interference); 3] =
        [("contention", &Contention::default()), ("measured", &measured), ("none", &NoInterference)];
    for (name, m) in models {
        for n in [2usize, 4] {
            let mut rates = [0.0; 4];
            c.bench_function(&format!("{name}/{n} jobs"), |b| {
                b.iter(|| m.rates(black_box(&gpu), black_box(&jobs[..n]), &mut rates[..n]))
            });
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
