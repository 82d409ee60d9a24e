//! The network's trainer: the float model of [`super`] fitted by Adam to `train gen` data, with
//! hand-written backpropagation, then quantised to the engine's integers.
//!
//! The target is [`crate::train`]'s: `result_weight * result + (1 - result_weight) * sigmoid(k * score)`,
//! from the side to move's point of view, with `k` fitted first on the search scores; the loss is the log
//! loss of `sigmoid(k * output)`. The validation split is `train fit`'s (whole games, seeded).
//!
//! **Reproducible.** The weights start from a seeded draw, batches come in a seeded order, and each batch
//! is cut into [`SHARDS`] fixed parts whose gradients are summed in their order, whichever thread made
//! them: the same data, seed and settings give the same network and losses for any `threads` (tested).

use draughts_engine::{Color, Variant};

use super::{FloatNet, KINDS, Network, NnueError, Sets};
use crate::level::Rng;
use crate::train::{FitReport, Sample, Split, fit_k, log_loss, sigmoid, validation_split};

/// The fixed parts of a batch (and of the validation set): the unit of work of a thread.
pub const SHARDS: usize = 8;

/// How the network is fitted.
#[derive(Clone, Debug)]
pub struct NnueFitConfig {
    pub hidden: usize,
    pub layer2: usize,
    pub epochs: u32,
    pub batch: usize,
    /// Adam's step at the start (falls linearly to a tenth at the end).
    pub learning_rate: f32,
    /// Share of the game result in the target; the rest is `sigmoid(k * search score)`.
    pub result_weight: f32,
    /// Decoupled weight decay (AdamW): after each step every weight (not the biases) shrinks by
    /// `step size * weight_decay` of itself. 0 (the default) is plain Adam, the fit of rounds nineteen to
    /// twenty-two.
    pub weight_decay: f32,
    pub validation: f32,
    pub split: Split,
    pub seed: u64,
    /// Threads that compute the shards' gradients (the result does not depend on it).
    pub threads: usize,
    /// Start from these weights (a network of the same variant and shape, for example the shipped one
    /// through [`super::Network::to_float`]) instead of the seeded draw: the fit goes on from it on new data.
    pub init: Option<FloatNet>,
}

impl Default for NnueFitConfig {
    fn default() -> Self {
        NnueFitConfig {
            hidden: 128,
            layer2: 32,
            epochs: 10,
            batch: 1024,
            learning_rate: 1e-3,
            result_weight: 0.5,
            weight_decay: 0.0,
            validation: 0.05,
            split: Split::Game,
            seed: 1,
            threads: 1,
            init: None,
        }
    }
}

/// A progress report: every tenth of an epoch (`validation_loss` `None`), and at each epoch's end.
#[derive(Clone, Debug)]
pub struct NnueProgress {
    pub epoch: u32,
    pub epochs: u32,
    /// Batches done in this epoch, of `batches`.
    pub batch: usize,
    pub batches: usize,
    /// Mean training loss of this epoch so far.
    pub train_loss: f64,
    pub validation_loss: Option<f64>,
}

/// The result of a network's fit: the pattern fit's report (its `final_validation_loss` is the
/// float model's after the last epoch) and the loss of the quantised network.
#[derive(Clone, Debug)]
pub struct NnueReport {
    pub fit: FitReport,
    /// Of the quantised network (what the engine plays).
    pub quantised_validation_loss: f64,
}

/// Offsets of the parameters in one flat vector: `w1 | b1 | w2 | b2 | w3 | b3`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    h: usize,
    l: usize,
    b1: usize,
    w2: usize,
    b2: usize,
    w3: usize,
    b3: usize,
    len: usize,
}

impl Layout {
    fn new(nf: usize, h: usize, l: usize) -> Layout {
        let b1 = nf * h;
        let w2 = b1 + h;
        let b2 = w2 + l * 2 * h;
        let w3 = b2 + l;
        let b3 = w3 + l;
        Layout {
            h,
            l,
            b1,
            w2,
            b2,
            w3,
            b3,
            len: b3 + 1,
        }
    }
}

/// One sample ready for the model: its piece sets (the features are made from them at each pass, which
/// costs little beside the pass and keeps a sample at 32 bytes) and the target.
struct Input {
    sets: Sets,
    white_to_move: bool,
    target: f32,
}

/// Per-thread buffers of a forward and backward pass.
struct Scratch {
    a: Vec<f32>,
    x: Vec<f32>,
    z: Vec<f32>,
    g_z: Vec<f32>,
    g_a: Vec<f32>,
    own: Vec<usize>,
    other: Vec<usize>,
}

impl Scratch {
    fn new(ly: &Layout) -> Scratch {
        Scratch {
            a: vec![0.0; 2 * ly.h],
            x: vec![0.0; 2 * ly.h],
            z: vec![0.0; ly.l],
            g_z: vec![0.0; ly.l],
            g_a: vec![0.0; 2 * ly.h],
            own: Vec::new(),
            other: Vec::new(),
        }
    }
}

/// The model's input of a sample.
fn input(s: &Sample, k: f64, result_weight: f32) -> Input {
    let rw = f64::from(result_weight);
    let white = rw * f64::from(s.result) / 2.0 + (1.0 - rw) * sigmoid(k * f64::from(s.score));
    let target = if s.white_to_move { white } else { 1.0 - white };
    Input {
        sets: Sets {
            white: s.white as u64,
            black: s.black as u64,
            kings: s.kings as u64,
        },
        white_to_move: s.white_to_move,
        target: target as f32,
    }
}

/// The float model's output (units of 100 centi-men), leaving the features (both perspectives', the
/// side to move's first, from `tables`, any network of the board) and the activations in `sc`.
fn forward(p: &[f32], ly: &Layout, tables: &Network, inp: &Input, sc: &mut Scratch) -> f32 {
    let h = ly.h;
    let (me, them) = if inp.white_to_move {
        (Color::White, Color::Black)
    } else {
        (Color::Black, Color::White)
    };
    tables.features(inp.sets, me, &mut sc.own);
    tables.features(inp.sets, them, &mut sc.other);
    for (side, feats) in [&sc.own, &sc.other].into_iter().enumerate() {
        let a = &mut sc.a[side * h..(side + 1) * h];
        a.copy_from_slice(&p[ly.b1..ly.b1 + h]);
        for &f in feats {
            for (ai, w) in a.iter_mut().zip(&p[f * h..(f + 1) * h]) {
                *ai += w;
            }
        }
    }
    for (x, a) in sc.x.iter_mut().zip(&sc.a) {
        *x = a.clamp(0.0, 1.0);
    }
    let mut out = p[ly.b3];
    for j in 0..ly.l {
        let row = &p[ly.w2 + j * 2 * h..ly.w2 + (j + 1) * 2 * h];
        let z = p[ly.b2 + j] + row.iter().zip(&sc.x).map(|(w, x)| w * x).sum::<f32>();
        sc.z[j] = z;
        out += p[ly.w3 + j] * z.clamp(0.0, 1.0);
    }
    out
}

/// Adds the gradient of the loss of one sample to `g`; returns its loss.
fn backward(
    p: &[f32],
    ly: &Layout,
    tables: &Network,
    inp: &Input,
    k: f32,
    sc: &mut Scratch,
    g: &mut [f32],
) -> f64 {
    let h = ly.h;
    let out = forward(p, ly, tables, inp, sc);
    let cm = out * super::OUTPUT_CM as f32;
    let pred = sigmoid(f64::from(k * cm));
    let loss = log_loss(pred, f64::from(inp.target));
    // d loss / d out.
    let g_out = (pred as f32 - inp.target) * k * super::OUTPUT_CM as f32;
    g[ly.b3] += g_out;
    for j in 0..ly.l {
        let z = sc.z[j];
        g[ly.w3 + j] += g_out * z.clamp(0.0, 1.0);
        sc.g_z[j] = if z > 0.0 && z < 1.0 {
            g_out * p[ly.w3 + j]
        } else {
            0.0
        };
    }
    sc.g_a.iter_mut().for_each(|v| *v = 0.0);
    for j in 0..ly.l {
        let gz = sc.g_z[j];
        if gz == 0.0 {
            continue;
        }
        g[ly.b2 + j] += gz;
        let base = ly.w2 + j * 2 * h;
        for i in 0..2 * h {
            g[base + i] += gz * sc.x[i];
            sc.g_a[i] += gz * p[base + i];
        }
    }
    for i in 0..2 * h {
        if !(sc.a[i] > 0.0 && sc.a[i] < 1.0) {
            sc.g_a[i] = 0.0;
        }
    }
    for (side, feats) in [&sc.own, &sc.other].into_iter().enumerate() {
        let ga = &sc.g_a[side * h..(side + 1) * h];
        for (gb, v) in g[ly.b1..ly.b1 + h].iter_mut().zip(ga) {
            *gb += v;
        }
        for &f in feats {
            for (gw, v) in g[f * h..(f + 1) * h].iter_mut().zip(ga) {
                *gw += v;
            }
        }
    }
    loss
}

/// The mean loss of the float model over `inputs` (in [`SHARDS`] parts summed in order).
fn mean_loss(
    p: &[f32],
    ly: &Layout,
    tables: &Network,
    inputs: &[Input],
    k: f32,
    threads: usize,
) -> f64 {
    if inputs.is_empty() {
        return 0.0;
    }
    let parts = shards(inputs.len());
    let sums = run_shards(&parts, threads, |range| {
        let mut sc = Scratch::new(ly);
        inputs[range]
            .iter()
            .map(|inp| {
                let out = forward(p, ly, tables, inp, &mut sc) * super::OUTPUT_CM as f32;
                log_loss(sigmoid(f64::from(k * out)), f64::from(inp.target))
            })
            .sum::<f64>()
    });
    sums.iter().sum::<f64>() / inputs.len() as f64
}

/// `n` items cut into [`SHARDS`] ranges.
fn shards(n: usize) -> Vec<std::ops::Range<usize>> {
    (0..SHARDS)
        .map(|s| s * n / SHARDS..(s + 1) * n / SHARDS)
        .collect()
}

/// `work` on every range, on up to `threads` threads; the results in the ranges' order.
fn run_shards<T: Send>(
    parts: &[std::ops::Range<usize>],
    threads: usize,
    work: impl Fn(std::ops::Range<usize>) -> T + Sync,
) -> Vec<T> {
    let threads = threads.clamp(1, parts.len().max(1));
    if threads == 1 {
        return parts.iter().map(|r| work(r.clone())).collect();
    }
    let per = parts.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .chunks(per)
            .map(|chunk| {
                let work = &work;
                scope.spawn(move || chunk.iter().map(|r| work(r.clone())).collect::<Vec<T>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a trainer thread panicked"))
            .collect()
    })
}

/// A seeded starting point: first-layer weights small around a bias of one half, so that most units
/// start inside the clip's linear part.
fn initial(ly: &Layout, rng: &mut Rng) -> Vec<f32> {
    let mut uniform = |r: f32| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 * r - r;
    let mut p = vec![0.0f32; ly.len];
    for v in &mut p[..ly.b1] {
        *v = uniform(0.1);
    }
    p[ly.b1..ly.w2].iter_mut().for_each(|v| *v = 0.5);
    let r2 = 1.0 / (2.0 * ly.h as f32).sqrt();
    for v in &mut p[ly.w2..ly.b2] {
        *v = uniform(r2);
    }
    p[ly.b2..ly.w3].iter_mut().for_each(|v| *v = 0.5);
    let r3 = 1.0 / (ly.l as f32).sqrt();
    for v in &mut p[ly.w3..ly.b3] {
        *v = uniform(r3);
    }
    p
}

fn to_float(variant: Variant, p: &[f32], ly: &Layout) -> FloatNet {
    FloatNet {
        variant,
        hidden: ly.h,
        layer2: ly.l,
        w1: p[..ly.b1].to_vec(),
        b1: p[ly.b1..ly.w2].to_vec(),
        w2: p[ly.w2..ly.b2].to_vec(),
        b2: p[ly.b2..ly.w3].to_vec(),
        w3: p[ly.w3..ly.b3].to_vec(),
        b3: p[ly.b3],
    }
}

/// The flat parameters of a float model of `ly`'s shape for `variant`.
fn from_float(variant: Variant, net: &FloatNet, ly: &Layout) -> Result<Vec<f32>, NnueError> {
    if net.variant != variant {
        return Err(NnueError::Variant(net.variant.key().to_owned()));
    }
    let mut p = Vec::with_capacity(ly.len);
    for part in [&net.w1, &net.b1, &net.w2, &net.b2, &net.w3] {
        p.extend_from_slice(part);
    }
    p.push(net.b3);
    if net.hidden != ly.h || net.layer2 != ly.l || p.len() != ly.len {
        return Err(NnueError::Shape(format!(
            "the starting network is H {} L {}, the fit H {} L {}",
            net.hidden, net.layer2, ly.h, ly.l
        )));
    }
    Ok(p)
}

/// Fits a network of `cfg`'s shape to the samples from a seeded start.
pub fn fit(
    variant: Variant,
    samples: &[Sample],
    cfg: &NnueFitConfig,
    mut progress: impl FnMut(&NnueProgress),
) -> Result<(Network, NnueReport), NnueError> {
    // A network of the shape at zero: its feature tables serve the inputs, and it checks the shape.
    let squares = super::Squares::of(variant.rules().board.board())?;
    let ly = Layout::new(KINDS * squares.n, cfg.hidden, cfg.layer2);
    let tables = Network::quantise(&to_float(variant, &vec![0.0; ly.len], &ly))?;

    let mut rng = Rng::new(cfg.seed);
    let split_cfg = crate::train::FitConfig {
        validation: cfg.validation,
        split: cfg.split,
        ..crate::train::FitConfig::default()
    };
    let (order, n_valid, validation_games) = validation_split(samples, &split_cfg, &mut rng);
    let k = fit_k(
        &order[n_valid..]
            .iter()
            .map(|&i| samples[i])
            .collect::<Vec<Sample>>(),
    );
    let valid_samples: Vec<Sample> = order[..n_valid].iter().map(|&i| samples[i]).collect();
    let make = |at: &[usize]| -> Vec<Input> {
        at.iter()
            .map(|&i| input(&samples[i], k, cfg.result_weight))
            .collect()
    };
    let train = make(&order[n_valid..]);
    let valid = make(&order[..n_valid]);
    drop(order);
    let search_loss = if valid.is_empty() {
        0.0
    } else {
        valid_samples
            .iter()
            .zip(&valid)
            .map(|(s, inp)| {
                let own = if s.white_to_move { s.score } else { -s.score };
                log_loss(sigmoid(k * f64::from(own)), f64::from(inp.target))
            })
            .sum::<f64>()
            / valid.len() as f64
    };

    let mut p = match &cfg.init {
        None => initial(&ly, &mut rng),
        Some(net) => from_float(variant, net, &ly)?,
    };
    let (mut m, mut v) = (vec![0.0f32; ly.len], vec![0.0f32; ly.len]);
    let (beta1, beta2, eps) = (0.9f32, 0.999f32, 1e-8f32);
    let batch = cfg.batch.max(SHARDS);
    let batches = train.len().div_ceil(batch);
    let total_steps = (batches * cfg.epochs as usize).max(1);
    let mut step = 0usize;
    let mut perm: Vec<usize> = (0..train.len()).collect();
    let kf = k as f32;
    let mut grad = vec![0.0f32; ly.len];
    let mut validation_loss = mean_loss(&p, &ly, &tables, &valid, kf, cfg.threads);
    for epoch in 1..=cfg.epochs {
        crate::train::shuffle(&mut perm, &mut rng);
        let mut loss_sum = 0.0f64;
        let mut seen = 0usize;
        let report_every = batches.div_ceil(10).max(1);
        for b in 0..batches {
            let idx = &perm[b * batch..((b + 1) * batch).min(train.len())];
            let parts = shards(idx.len());
            let results = run_shards(&parts, cfg.threads, |range| {
                let mut g = vec![0.0f32; ly.len];
                let mut sc = Scratch::new(&ly);
                let loss: f64 = idx[range]
                    .iter()
                    .map(|&i| backward(&p, &ly, &tables, &train[i], kf, &mut sc, &mut g))
                    .sum();
                (g, loss)
            });
            grad.iter_mut().for_each(|x| *x = 0.0);
            for (g, loss) in &results {
                for (a, b) in grad.iter_mut().zip(g) {
                    *a += b;
                }
                loss_sum += loss;
            }
            seen += idx.len();
            step += 1;
            let lr = cfg.learning_rate * (1.0 - 0.9 * (step - 1) as f32 / total_steps as f32);
            let scale = 1.0 / idx.len() as f32;
            let (c1, c2) = (1.0 - beta1.powi(step as i32), 1.0 - beta2.powi(step as i32));
            for i in 0..ly.len {
                let gi = grad[i] * scale;
                if gi == 0.0 && m[i] == 0.0 {
                    continue;
                }
                m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
                v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
                p[i] -= lr * (m[i] / c1) / ((v[i] / c2).sqrt() + eps);
            }
            if cfg.weight_decay > 0.0 {
                let keep = 1.0 - lr * cfg.weight_decay;
                for range in [0..ly.b1, ly.w2..ly.b2, ly.w3..ly.b3] {
                    p[range].iter_mut().for_each(|w| *w *= keep);
                }
            }
            // The second layer stays where the fastest kernel runs it (`super::W2_LIMIT`).
            for w in &mut p[ly.w2..ly.b2] {
                *w = w.clamp(-super::W2_LIMIT, super::W2_LIMIT);
            }
            if (b + 1) % report_every == 0 && b + 1 < batches {
                progress(&NnueProgress {
                    epoch,
                    epochs: cfg.epochs,
                    batch: b + 1,
                    batches,
                    train_loss: loss_sum / seen.max(1) as f64,
                    validation_loss: None,
                });
            }
        }
        validation_loss = mean_loss(&p, &ly, &tables, &valid, kf, cfg.threads);
        progress(&NnueProgress {
            epoch,
            epochs: cfg.epochs,
            batch: batches,
            batches,
            train_loss: loss_sum / seen.max(1) as f64,
            validation_loss: Some(validation_loss),
        });
    }
    let net = Network::quantise(&to_float(variant, &p, &ly))?;
    let quantised_validation_loss = if valid.is_empty() {
        0.0
    } else {
        valid
            .iter()
            .map(|inp| {
                let cm = net.evaluate(inp.sets, inp.white_to_move);
                log_loss(sigmoid(k * f64::from(cm)), f64::from(inp.target))
            })
            .sum::<f64>()
            / valid.len() as f64
    };
    Ok((
        net,
        NnueReport {
            fit: FitReport {
                k,
                train_samples: train.len(),
                validation_samples: valid.len(),
                validation_games,
                search_loss,
                final_validation_loss: validation_loss,
            },
            quantised_validation_loss,
        },
    ))
}
