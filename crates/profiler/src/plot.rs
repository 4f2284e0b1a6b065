//! The four curves of a profile: terminal sparklines and a PNG chart.
//!
//! The PNG uses DejaVu Sans embedded in the binary (the `dejavu` crate, registered with
//! plotters' `ab_glyph` backend), so text renders on machines with no system fonts.

use std::path::Path;
use std::sync::Once;

use dqngpu_model::{AppProfile, Resource};
use plotters::prelude::*;

use crate::ProfilerError;

/// Font family name the embedded font is registered under.
const FONT: &str = "sans-serif";

/// Axis label, with unit, of each resource.
pub fn axis_label(r: Resource) -> &'static str {
    match r {
        Resource::GpuUtil => "GPU util (%)",
        Resource::GpuMem => "GPU memory (MiB)",
        Resource::Sm => "SM activity (%)",
        Resource::Pcie => "PCIe TX+RX (MB/s)",
    }
}

/// A sparkline of `values` at most `width` characters wide (each character the mean of its
/// share of the values), scaled from 0 to `max` (the values' own maximum when `None`).
pub fn sparkline(values: &[f64], width: usize, max: Option<f64>) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if values.is_empty() || width == 0 {
        return String::new();
    }
    let cols = width.min(values.len());
    let means: Vec<f64> = (0..cols)
        .map(|c| {
            let a = c * values.len() / cols;
            let b = ((c + 1) * values.len() / cols).max(a + 1);
            values[a..b].iter().sum::<f64>() / (b - a) as f64
        })
        .collect();
    let top = max.unwrap_or_else(|| means.iter().copied().fold(0.0, f64::max));
    means
        .iter()
        .map(|&v| {
            let f = if top > 0.0 && v.is_finite() { (v / top).clamp(0.0, 1.0) } else { 0.0 };
            BARS[((f * 7.0).round() as usize).min(7)]
        })
        .collect()
}

/// A tick label: whole numbers on axes that reach 10 or more, one decimal below that.
fn tick(v: f64, axis_max: f64) -> String {
    if axis_max >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font; a failure would leave plotters to report it.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Draws the four curves over progress time, one panel each, into a PNG of `width`x`height`.
/// `path` must end in `.png` (any case); the chart is drawn into a temporary file beside it
/// and renamed into place, so a failed drawing never leaves a half-written or emptied file.
pub fn draw_png(p: &AppProfile, path: &Path, width: u32, height: u32) -> Result<(), ProfilerError> {
    register_font();
    let err = |e: String| ProfilerError::Plot { path: path.to_path_buf(), message: e };
    let is_png = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !is_png {
        return Err(err("a chart is written as PNG: give a file name ending in .png".into()));
    }
    // Its folder is made, and a file that cannot be written is named with the OS's reason
    // here: the plotting library would report it only at the end, as a debug dump.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create its folder: {e}")))?;
    }
    if path.is_dir() {
        return Err(err("cannot write it: it is a directory".into()));
    }
    // Hidden, unique to the process, and ending in .png (the encoder goes by the extension).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.unwrap_or(Path::new(".")).join(format!(".{stem}.tmp{}-{k}.png", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| err(format!("cannot write its temporary file {}: {e}", tmp.display())))?;
    let drawn = draw_into(p, &tmp, width, height)
        .map_err(err)
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| err(format!("cannot write it: {e}"))));
    if drawn.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drawn
}

/// [`draw_png`]'s drawing, into `path`.
fn draw_into(p: &AppProfile, path: &Path, width: u32, height: u32) -> Result<(), String> {
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!("{}: {} samples every {} s ({:.0} s)", p.app.name, p.samples.len(), p.interval_s, p.solo_s());
    let root = root.titled(&title, (FONT, 22)).map_err(|e| e.to_string())?;
    let panels = root.split_evenly((Resource::ALL.len(), 1));
    let colours = [BLUE, RED, GREEN, MAGENTA];
    let t_end = p.solo_s();
    for ((panel, r), colour) in panels.iter().zip(Resource::ALL).zip(colours) {
        let ys: Vec<f64> = p.samples.iter().map(|s| s.get(r)).collect();
        let y_max = match r {
            Resource::GpuUtil | Resource::Sm => 100.0,
            _ => ys.iter().copied().fold(0.0, f64::max).max(1.0) * 1.1,
        };
        let mut chart = ChartBuilder::on(panel)
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..t_end, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("progress time (s)")
            .y_desc(axis_label(r))
            .x_label_formatter(&|v| tick(*v, t_end))
            .y_label_formatter(&|v| tick(*v, y_max))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(|e| e.to_string())?;
        // Step line: sample i holds over [i*dt, (i+1)*dt).
        let pts = ys.iter().enumerate().flat_map(|(i, &y)| {
            let a = i as f64 * p.interval_s;
            [(a, y), (a + p.interval_s, y)]
        });
        chart.draw_series(LineSeries::new(pts, colour.stroke_width(2))).map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_and_averages() {
        assert_eq!(sparkline(&[0.0, 50.0, 100.0], 10, Some(100.0)), "▁▅█");
        assert_eq!(sparkline(&[0.0, 0.0, 100.0, 100.0], 2, None), "▁█");
        assert_eq!(sparkline(&[], 5, None), "");
        assert_eq!(sparkline(&[0.0; 3], 5, None), "▁▁▁");
    }

    #[test]
    fn draws_a_png_with_the_embedded_font() {
        let samples = (0..30).map(|i| dqngpu_model::Resources::new(f64::from(i), 100.0, 50.0, 2.0)).collect();
        let app = dqngpu_model::AppInfo { name: "demo".into(), ..Default::default() };
        let p = AppProfile::new(app, 1.0, samples).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("demo.png");
        draw_png(&p, &out, 600, 500).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(&bytes[..4], b"\x89PNG");
        // Its folder is made; a path that cannot be a file is named with the OS's reason.
        let nested = dir.path().join("no/such/dir/x.png");
        draw_png(&p, &nested, 600, 500).unwrap();
        assert!(nested.is_file());
        let e = draw_png(&p, &dir.path().join("no.png"), 600, 500);
        assert!(e.is_ok(), "{e:?}");
        std::fs::create_dir(dir.path().join("d.png")).unwrap();
        let e = draw_png(&p, &dir.path().join("d.png"), 600, 500).unwrap_err().to_string();
        assert!(e.contains("d.png") && e.contains("cannot write it"), "{e}");
        // Any case of .png; no temporary file is left behind.
        draw_png(&p, &dir.path().join("UP.PNG"), 600, 500).unwrap();
        let hidden: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
    }

    /// A path that is no .png (the profile itself, say) is refused before anything is
    /// written: it was truncated first.
    #[test]
    fn a_path_that_is_no_png_is_refused_and_left_alone() {
        let samples = (0..3).map(|i| dqngpu_model::Resources::new(f64::from(i), 100.0, 50.0, 2.0)).collect();
        let p =
            AppProfile::new(dqngpu_model::AppInfo { name: "demo".into(), ..Default::default() }, 1.0, samples).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for name in ["demo.json", "demo", "demo.png.csv"] {
            let out = dir.path().join(name);
            std::fs::write(&out, "keep me").unwrap();
            let e = draw_png(&p, &out, 600, 500).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(".png"), "{e}");
            assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
        }
    }
}
