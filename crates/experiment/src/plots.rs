//! Plots (plotters), each written as SVG and PNG. Text uses DejaVu Sans, embedded from the
//! `dejavu` crate, so a machine without system fonts draws the same pictures.

use std::path::{Path, PathBuf};
use std::sync::Once;

use dqngpu_model::error::write_file_atomic;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::ExperimentError;

/// The font family every chart uses.
const FONT: &str = "sans-serif";

static FONTS: Once = Once::new();

/// Registers DejaVu Sans under the family [`FONT`] (once per process).
fn register_fonts() {
    FONTS.call_once(|| {
        // The bytes are a valid TTF shipped with the crate; a failure would only mean no text.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A chart that draws itself on any plotters backend.
pub trait Chart {
    /// Size in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws on `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// A written plot: its SVG and PNG files and the PNG bytes (for embedding in HTML).
#[derive(Debug, Clone)]
pub struct PlotFile {
    /// File stem (`class_random`).
    pub name: String,
    /// What it shows.
    pub title: String,
    /// The SVG file.
    pub svg: PathBuf,
    /// The PNG file.
    pub png: PathBuf,
    /// The PNG's bytes.
    pub png_bytes: Vec<u8>,
}

/// Y tick labels: whole numbers on axes that reach 10 or more, two decimals on smaller ones.
fn tick(v: f64, axis_max: f64) -> String {
    if axis_max >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws `chart` into `dir/name.svg` and `dir/name.png` (each written atomically).
pub fn write_chart(chart: &impl Chart, dir: &Path, name: &str, title: &str) -> Result<PlotFile, ExperimentError> {
    register_fonts();
    let (w, h) = chart.size();
    let svg_path = dir.join(format!("{name}.svg"));
    let png_path = dir.join(format!("{name}.png"));
    let plot_err = |path: &Path, message: String| ExperimentError::Plot { path: path.to_path_buf(), message };

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&svg_path, err(e)))?;
        chart.draw(&root).map_err(|m| plot_err(&svg_path, m))?;
        root.present().map_err(|e| plot_err(&svg_path, err(e)))?;
    }
    write_file_atomic(&svg_path, svg.as_bytes())?;

    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&png_path, err(e)))?;
        chart.draw(&root).map_err(|m| plot_err(&png_path, m))?;
        root.present().map_err(|e| plot_err(&png_path, err(e)))?;
    }
    let png_bytes = encode_png(&rgb, w, h).map_err(|m| plot_err(&png_path, m))?;
    write_file_atomic(&png_path, &png_bytes)?;
    Ok(PlotFile { name: name.to_string(), title: title.to_string(), svg: svg_path, png: png_path, png_bytes })
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(out)
}

/// The colour of the i-th scheduler, the same in every chart.
pub fn scheduler_colour(i: usize) -> RGBColor {
    const C: [RGBColor; 12] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        // Two more, so that the default eleven schedulers (and one more) each get their own.
        RGBColor(0, 0, 0),
        RGBColor(0, 0, 128),
    ];
    C[i % C.len()]
}

const THESIS_COLOUR: RGBColor = RGBColor(200, 0, 0);

/// One bar panel: a value per scheduler with a 95% CI and the thesis's figure where it gives one.
#[derive(Debug, Clone)]
pub struct BarPanel {
    /// Panel title.
    pub title: String,
    /// Y axis description, with unit.
    pub y_desc: String,
    /// (mean, ci95) per scheduler.
    pub values: Vec<(f64, f64)>,
    /// The thesis's figure per scheduler.
    pub thesis: Vec<Option<f64>>,
    /// Draw the CI error bars.
    pub show_ci: bool,
}

/// Panels of per-scheduler bars stacked vertically (the thesis's Figs. 10-14).
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Scheduler names (x axis).
    pub schedulers: Vec<String>,
    /// Colour index of each scheduler.
    pub colours: Vec<usize>,
    /// The panels.
    pub panels: Vec<BarPanel>,
}

fn legend_box<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, 15))
        .draw()
        .map_err(err)
}

impl Chart for BarChart {
    fn size(&self) -> (u32, u32) {
        (1000, 330 * self.panels.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let areas = root.split_evenly((self.panels.len().max(1), 1));
        let n = self.schedulers.len();
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            let top = panel
                .values
                .iter()
                .map(|(m, c)| m + c)
                .chain(panel.thesis.iter().flatten().copied())
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            let ymax = if top > 0.0 { top * 1.45 } else { 1.0 };
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, (FONT, 20))
                .margin(8)
                .x_label_area_size(34)
                .y_label_area_size(80)
                .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0f64..ymax)
                .map_err(err)?;
            let names = &self.schedulers;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n)
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                    _ => String::new(),
                })
                .y_desc(&panel.y_desc)
                .y_label_formatter(&|v| tick(*v, ymax))
                .label_style((FONT, 15))
                .axis_desc_style((FONT, 16))
                .draw()
                .map_err(err)?;
            chart
                .draw_series((0..n).map(|i| {
                    let v = panel.values.get(i).map(|x| x.0).unwrap_or(0.0);
                    let colour = scheduler_colour(self.colours.get(i).copied().unwrap_or(i));
                    let mut bar = Rectangle::new(
                        [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), v)],
                        colour.filled(),
                    );
                    bar.set_margin(0, 0, 14, 14);
                    bar
                }))
                .map_err(err)?
                .label("ours: mean over seeds")
                .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], scheduler_colour(0).filled()));
            if panel.show_ci {
                chart
                    .draw_series((0..n).filter_map(|i| {
                        let (m, c) = *panel.values.get(i)?;
                        Some(ErrorBar::new_vertical(
                            SegmentValue::CenterOf(i),
                            m - c,
                            m,
                            m + c,
                            BLACK.stroke_width(2),
                            14,
                        ))
                    }))
                    .map_err(err)?
                    .label("95% CI (Student t)")
                    .legend(|(x, y)| PathElement::new(vec![(x + 8, y - 7), (x + 8, y + 7)], BLACK.stroke_width(2)));
            }
            if panel.thesis.iter().any(Option::is_some) {
                chart
                    .draw_series(panel.thesis.iter().enumerate().filter_map(|(i, t)| {
                        t.map(|v| TriangleMarker::new((SegmentValue::CenterOf(i), v), 9, THESIS_COLOUR.filled()))
                    }))
                    .map_err(err)?
                    .label("thesis (reported)")
                    .legend(|(x, y)| TriangleMarker::new((x + 8, y), 7, THESIS_COLOUR.filled()));
            }
            legend_box(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    }
}

/// Stacked bars: per scheduler, segments that add up (slowdown buckets, time + training).
#[derive(Debug, Clone)]
pub struct StackedChart {
    /// Title.
    pub title: String,
    /// Y axis description, with unit.
    pub y_desc: String,
    /// Scheduler names (x axis).
    pub schedulers: Vec<String>,
    /// Segment names (legend), bottom first.
    pub segments: Vec<String>,
    /// Segment colours.
    pub segment_colours: Vec<RGBColor>,
    /// `values[scheduler][segment]`.
    pub values: Vec<Vec<f64>>,
    /// A marker per scheduler (the thesis's figure), with its legend text.
    pub markers: Vec<Option<f64>>,
    /// Legend text of the markers.
    pub marker_label: String,
    /// A horizontal reference line (e.g. 1.0 = baseline).
    pub reference: Option<f64>,
}

impl Chart for StackedChart {
    fn size(&self) -> (u32, u32) {
        (1000, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let n = self.schedulers.len();
        let top = self
            .values
            .iter()
            .map(|v| v.iter().sum::<f64>())
            .chain(self.markers.iter().flatten().copied())
            .chain(self.reference)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let ymax = if top > 0.0 { top * 1.5 } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 20))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(80)
            .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0f64..ymax)
            .map_err(err)?;
        let names = &self.schedulers;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc(&self.y_desc)
            .y_label_formatter(&|v| tick(*v, ymax))
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(err)?;
        for (k, seg) in self.segments.iter().enumerate() {
            let colour = self.segment_colours.get(k).copied().unwrap_or_else(|| scheduler_colour(k));
            chart
                .draw_series((0..n).map(|i| {
                    let vals = self.values.get(i).cloned().unwrap_or_default();
                    let lo: f64 = vals.iter().take(k).sum();
                    let hi = lo + vals.get(k).copied().unwrap_or(0.0);
                    let mut bar = Rectangle::new(
                        [(SegmentValue::Exact(i), lo), (SegmentValue::Exact(i + 1), hi)],
                        colour.filled(),
                    );
                    bar.set_margin(0, 0, 18, 18);
                    bar
                }))
                .map_err(err)?
                .label(seg.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour.filled()));
        }
        if let Some(r) = self.reference {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(SegmentValue::Exact(0), r), (SegmentValue::Last, r)],
                    BLACK.stroke_width(1),
                )))
                .map_err(err)?;
        }
        if self.markers.iter().any(Option::is_some) {
            chart
                .draw_series(self.markers.iter().enumerate().filter_map(|(i, t)| {
                    t.map(|v| TriangleMarker::new((SegmentValue::CenterOf(i), v), 9, THESIS_COLOUR.filled()))
                }))
                .map_err(err)?
                .label(self.marker_label.as_str())
                .legend(|(x, y)| TriangleMarker::new((x + 8, y), 7, THESIS_COLOUR.filled()));
        }
        legend_box(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// GPU utilisation and memory over one run.
#[derive(Debug, Clone)]
pub struct TimelineChart {
    /// Title.
    pub title: String,
    /// Sample times, s.
    pub t_s: Vec<f64>,
    /// GPU utilisation, %.
    pub gpu_util_pct: Vec<f64>,
    /// GPU memory, %.
    pub gpu_mem_pct: Vec<f64>,
}

impl Chart for TimelineChart {
    fn size(&self) -> (u32, u32) {
        (1000, 400)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let tmax = self.t_s.last().copied().filter(|t| *t > 0.0).unwrap_or(1.0);
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 20))
            .margin(10)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..tmax, 0f64..135f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("% of GPU capacity")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(err)?;
        let util = RGBColor(31, 119, 180);
        let mem = RGBColor(255, 127, 14);
        chart
            .draw_series(segments(on_axes(&self.t_s, &self.gpu_util_pct), util.stroke_width(2)))
            .map_err(err)?
            .label("GPU utilisation (%)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], util.stroke_width(3)));
        chart
            .draw_series(segments(on_axes(&self.t_s, &self.gpu_mem_pct), mem.stroke_width(2)))
            .map_err(err)?
            .label("GPU memory in use (%)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], mem.stroke_width(3)));
        legend_box(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// One line of a [`CurveChart`].
#[derive(Debug, Clone)]
pub struct CurveSeries {
    /// Agent name (legend).
    pub name: String,
    /// Colour index.
    pub colour: usize,
    /// (iteration, value).
    pub points: Vec<(f64, f64)>,
}

/// Training curves: a value per iteration for each agent, or a note when none trained.
#[derive(Debug, Clone)]
pub struct CurveChart {
    /// Title.
    pub title: String,
    /// Y axis description, with unit.
    pub y_desc: String,
    /// One line per agent.
    pub series: Vec<CurveSeries>,
    /// Shown instead of axes when there is no series.
    pub empty_note: String,
}

impl Chart for CurveChart {
    fn size(&self) -> (u32, u32) {
        (1000, 450)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        if pts.is_empty() {
            let area = root.titled(&self.title, (FONT, 20)).map_err(err)?;
            let (w, h) = area.dim_in_pixel();
            area.draw(&Text::new(self.empty_note.clone(), (20, h as i32 / 2), (FONT, 16).into_font())).map_err(err)?;
            let _ = w;
            return Ok(());
        }
        let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
        let ymin = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let ymax = pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        let pad = ((ymax - ymin).abs() * 0.1).max(1e-6);
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 20))
            .margin(10)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..xmax, (ymin - pad)..(ymax + 4.0 * pad))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("training iteration")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc(&self.y_desc)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(err)?;
        for CurveSeries { name, colour, points } in &self.series {
            let c = scheduler_colour(*colour);
            chart
                .draw_series(segments(
                    points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect(),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        }
        legend_box(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// A thick polyline as separate two-point segments. plotters joins the segments of one thick
/// path with miters, and at an acute corner (a job that runs for a moment) the miter shoots far
/// past the frame; separate segments have no joins, so every pixel stays near its segment.
fn segments(points: Vec<(f64, f64)>, style: ShapeStyle) -> Vec<PathElement<(f64, f64)>> {
    points.windows(2).map(|w| PathElement::new(vec![w[0], w[1]], style)).collect()
}

/// Points of a timeline that plotters can draw inside the axes: plotters does not clip, so a
/// non-finite or out-of-range value would draw a stray line across the frame.
fn on_axes(t_s: &[f64], v: &[f64]) -> Vec<(f64, f64)> {
    t_s.iter().zip(v).filter(|(t, v)| t.is_finite() && v.is_finite()).map(|(t, v)| (*t, v.clamp(0.0, 135.0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schedulers_each_get_their_own_colour() {
        let n = crate::config::ExperimentConfig::default().schedulers.names.len();
        assert!(n >= 11, "{n}");
        for i in 0..n {
            for j in 0..i {
                assert_ne!(scheduler_colour(i), scheduler_colour(j), "schedulers {j} and {i}");
            }
        }
    }

    /// Decodes a PNG written by [`write_chart`] into (width, height, RGB bytes).
    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut r = png::Decoder::new(bytes).read_info().unwrap();
        let mut buf = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    /// A step-shaped timeline (jobs start and stop at once) must stay inside the frame: thick
    /// lines with sharp corners used to draw miter spikes above the top border and below the
    /// x axis.
    #[test]
    fn timeline_steps_stay_inside_the_frame() {
        let dir = tempfile::tempdir().unwrap();
        let mut t_s = Vec::new();
        let (mut util, mut mem) = (Vec::new(), Vec::new());
        for k in 0..60 {
            let t = k as f64 * 10.0;
            let (u, m) = if k % 4 < 2 { (95.0, 80.0) } else { (0.0, 2.0) };
            // Two points at each step: a vertical jump, then a flat run.
            t_s.extend([t, t + 10.0]);
            util.extend([u, u]);
            mem.extend([m, m]);
        }
        // Narrow spikes (a job that runs for a moment): very acute corners, a pixel or so wide.
        for k in 0..40 {
            let t = 600.0 + k as f64 * 5.0;
            let w = 0.3 + 0.4 * (k % 5) as f64;
            t_s.extend([t, t + w, t + 2.0 * w, t + 5.0]);
            util.extend([0.0, 100.0, 0.0, 0.0]);
            mem.extend([1.0, 90.0, 1.0, 1.0]);
        }
        // Near-vertical zigzags between full and empty.
        for k in 0..200 {
            let t = 800.0 + k as f64 * 0.7;
            t_s.push(t);
            util.push(if k % 2 == 0 { 100.0 } else { 0.0 });
            mem.push(if k % 3 == 0 { 95.0 } else { 0.0 });
        }
        let tl = TimelineChart { title: "steps".into(), t_s, gpu_util_pct: util, gpu_mem_pct: mem };
        let p = write_chart(&tl, dir.path(), "timeline", "T").unwrap();
        let (w, h, rgb) = decode(&p.png_bytes);
        let series = [RGBColor(31, 119, 180), RGBColor(255, 127, 14)];
        let near = |x: usize, y: usize| {
            let i = (y * w as usize + x) * 3;
            series.iter().any(|c| {
                (rgb[i] as i32 - c.0 as i32).abs() < 40
                    && (rgb[i + 1] as i32 - c.1 as i32).abs() < 40
                    && (rgb[i + 2] as i32 - c.2 as i32).abs() < 40
            })
        };
        // The caption band above the frame and the tick-label band below the x axis hold no
        // series colour.
        for y in (0..34).chain(h as usize - 40..h as usize) {
            for x in 0..w as usize {
                assert!(!near(x, y), "series colour at ({x}, {y}) outside the plotting area");
            }
        }
    }

    #[test]
    fn writes_svg_and_png_of_every_chart_kind() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = ["sjf", "tetris", "deeprm-mean"].iter().map(|s| s.to_string()).collect();
        let bars = BarChart {
            schedulers: names.clone(),
            colours: vec![0, 1, 2],
            panels: vec![BarPanel {
                title: "makespan".into(),
                y_desc: "makespan (s)".into(),
                values: vec![(100.0, 5.0), (120.0, 0.0), (90.0, 9.0)],
                thesis: vec![Some(110.0), None, None],
                show_ci: true,
            }],
        };
        let p = write_chart(&bars, dir.path(), "bars", "Bars").unwrap();
        assert!(p.png_bytes.starts_with(b"\x89PNG"));
        assert_eq!(std::fs::read(&p.png).unwrap(), p.png_bytes);
        let svg = std::fs::read_to_string(&p.svg).unwrap();
        assert!(svg.contains("<svg") && svg.contains("deeprm-mean") && svg.contains("thesis (reported)"));

        let stacked = StackedChart {
            title: "t".into(),
            y_desc: "jobs".into(),
            schedulers: names.clone(),
            segments: vec!["a".into(), "b".into()],
            segment_colours: vec![],
            values: vec![vec![1.0, 2.0], vec![3.0, 0.0], vec![0.0, 0.0]],
            markers: vec![None, Some(2.0), None],
            marker_label: "thesis".into(),
            reference: Some(1.0),
        };
        write_chart(&stacked, dir.path(), "stacked", "S").unwrap();
        let tl = TimelineChart {
            title: "tl".into(),
            t_s: vec![0.0, 1.0, 2.0],
            gpu_util_pct: vec![10.0, 100.0, 50.0],
            gpu_mem_pct: vec![5.0, 6.0, 7.0],
        };
        write_chart(&tl, dir.path(), "timeline", "T").unwrap();
        let empty =
            CurveChart { title: "c".into(), y_desc: "s".into(), series: vec![], empty_note: "no agent trained".into() };
        let p = write_chart(&empty, dir.path(), "curves", "C").unwrap();
        assert!(std::fs::read_to_string(p.svg).unwrap().contains("no agent trained"));
        let curves = CurveChart {
            title: "c".into(),
            y_desc: "s".into(),
            series: vec![CurveSeries { name: "dqngpu".into(), colour: 4, points: vec![(0.0, 3.0), (1.0, 2.0)] }],
            empty_note: String::new(),
        };
        write_chart(&curves, dir.path(), "curves2", "C").unwrap();
        let one = BarChart { schedulers: vec!["sjf".into()], colours: vec![0], panels: bars.panels[..1].to_vec() };
        let one_panel = BarPanel { values: vec![(5.0, 1.0)], thesis: vec![None], ..one.panels[0].clone() };
        write_chart(&BarChart { panels: vec![one_panel], ..one }, dir.path(), "one", "One").unwrap();
        // No temporary files are left behind.
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp")));
    }
}

/// One labelled point per scheduler: what it trades (x) for what it gains (y).
#[derive(Debug, Clone)]
pub struct ScatterChart {
    /// Title.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// (name, colour index, x, y).
    pub points: Vec<(String, usize, f64, f64)>,
}

impl Chart for ScatterChart {
    fn size(&self) -> (u32, u32) {
        (900, 600)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let pts: Vec<&(String, usize, f64, f64)> =
            self.points.iter().filter(|p| p.2.is_finite() && p.3.is_finite()).collect();
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for p in &pts {
            x0 = x0.min(p.2);
            x1 = x1.max(p.2);
            y0 = y0.min(p.3);
            y1 = y1.max(p.3);
        }
        if pts.is_empty() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        let (px, py) = (((x1 - x0) * 0.15).max(0.01), ((y1 - y0) * 0.15).max(0.01));
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 18))
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 - px)..(x1 + 2.0 * px), (y0 - py)..(y1 + py))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .x_label_formatter(&|v| format!("{v:.2}"))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(err)?;
        for (name, colour, x, y) in pts {
            let c = scheduler_colour(*colour);
            chart.draw_series(std::iter::once(Circle::new((*x, *y), 6, c.filled()))).map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(name.clone(), (*x + px * 0.08, *y), (FONT, 14).into_font())))
                .map_err(err)?;
        }
        Ok(())
    }
}
