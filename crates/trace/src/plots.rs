//! Allocation against arrived GPU demand (the FGD paper's Fig. 9), as SVG and PNG. Text uses
//! DejaVu Sans from the `dejavu` crate, so a machine without fonts draws the same picture.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Result, TraceError};

const FONT: &str = "sans-serif";
static FONTS: Once = Once::new();

fn register_fonts() {
    FONTS.call_once(|| {
        // The bytes are a valid TTF shipped with the crate; a failure would only mean no text.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// One line of the chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Y value at x = 0, 1, ... (missing points are skipped).
    pub points: Vec<Option<f64>>,
}

/// A published value to mark beside the lines.
#[derive(Debug, Clone)]
pub struct Mark {
    /// Which series it belongs to (same colour).
    pub series: usize,
    /// X (percent arrived).
    pub x: f64,
    /// Y (percent allocated).
    pub y: f64,
}

/// A line chart of `series` with `marks` as crosses.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_desc: String,
    /// Y axis label.
    pub y_desc: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Published points.
    pub marks: Vec<Mark>,
    /// X range.
    pub x_range: (f64, f64),
    /// Y range.
    pub y_range: (f64, f64),
}

/// The colour of the i-th series.
pub fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 7] = [
        RGBColor(127, 127, 127),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

impl LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> std::result::Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(self.x_range.0..self.x_range.1, self.y_range.0..self.y_range.1)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(e)?;
        for (i, s) in self.series.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .enumerate()
                .filter_map(|(x, y)| y.map(|y| (x as f64, y)))
                .filter(|(x, _)| *x >= self.x_range.0)
                .collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(e)?
                .label(&s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        }
        for m in &self.marks {
            let c = colour(m.series);
            chart.draw_series(std::iter::once(Cross::new((m.x, m.y), 6, c.stroke_width(2)))).map_err(e)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .draw()
            .map_err(e)?;
        root.present().map_err(e)
    }

    /// Writes `dir/stem.svg` and `dir/stem.png`; returns both paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf)> {
        register_fonts();
        let size = (900, 560);
        let svg = dir.join(format!("{stem}.svg"));
        let png = dir.join(format!("{stem}.png"));
        let fail = |p: &Path, message: String| TraceError::Plot { path: p.to_path_buf(), message };
        self.draw(&SVGBackend::new(&svg, size).into_drawing_area()).map_err(|m| fail(&svg, m))?;
        self.draw(&BitMapBackend::new(&png, size).into_drawing_area()).map_err(|m| fail(&png, m))?;
        Ok((svg, png))
    }
}
