//! The charts, drawn by `plotters` into SVG text: grouped bars (panels side by side on one y
//! scale, a bar per series in every group, its value on top) and lines (panels stacked on
//! shared x and y scales, a line per series, dashed vertical markers for events). Ours is
//! only the description of a chart, where the axes end, and a legend row above the panels
//! that names every series once. plotters' SVG backend writes text as `<text>` and only
//! estimates its width, so no font is needed.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What every chart has around its panels.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) title: String,
    /// Names of the series, one colour each: bars in this order within a group; lines in this
    /// order, the first (an aggregate) drawn thicker.
    pub(crate) series: Vec<String>,
    pub(crate) y_unit: String,
}

/// A panel of bars: its title, and its groups, each a label and a value per series (None or
/// NaN: no bar).
pub(crate) type BarPanel = (String, Vec<(String, Vec<Option<f64>>)>);
/// The points of a line, (x, y).
pub(crate) type Line = Vec<(f64, f64)>;

/// Panels side by side on one y scale.
#[derive(Debug, Clone)]
pub(crate) struct BarChart {
    pub(crate) frame: Frame,
    pub(crate) panels: Vec<BarPanel>,
}

/// Panels stacked top to bottom on shared scales, so an event at the same x lines up.
#[derive(Debug, Clone)]
pub(crate) struct LineChart {
    pub(crate) frame: Frame,
    pub(crate) x_label: String,
    pub(crate) panels: Vec<LinePanel>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct LinePanel {
    pub(crate) title: String,
    /// One list of (x, y) per series, in series order; points that are not finite are skipped.
    pub(crate) lines: Vec<Line>,
    /// Vertical lines at x, labelled.
    pub(crate) markers: Vec<(f64, String)>,
}

/// Series colours after the first, plotters' usual blue, orange, green ...; the first is
/// grey among bars (the reference, raw TCP) and black among lines (the aggregate).
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn colour(i: usize, lines: bool) -> RGBColor {
    match (i, lines) {
        (0, false) => RGBColor(0x9e, 0x9e, 0x9e),
        (0, true) => BLACK,
        _ => PALETTE[(i - 1) % PALETTE.len()],
    }
}

const MARKER: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const GRID: RGBColor = RGBColor(0xe0, 0xe0, 0xe0);
/// Heights and widths in pixels: the title and legend rows, the y labels, a bar, the gap
/// between groups, a bar panel, a line panel.
const HEADER: u32 = 50;
const Y_LABELS: u32 = 56;
const BAR: u32 = 26;
const GROUP_GAP: u32 = 22;
const BAR_PANEL_HEIGHT: u32 = 330;
const LINE_PANEL: (u32, u32) = (760, 260);
const X_TICKS: f64 = 10.0;
const Y_TICKS: usize = 6;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn failed(e: impl std::fmt::Display) -> String {
    format!("drawing the chart: {e}")
}

/// Room the legend row needs.
fn legend_width(series: &[String]) -> u32 {
    let names: usize = series.iter().map(|s| s.chars().count()).sum();
    Y_LABELS + series.len() as u32 * 40 + names as u32 * 7
}

/// Paints the background, the title and the legend row (a square per series for bars, a
/// stroke for lines); the area below them.
fn header<'a>(root: &Area<'a>, frame: &Frame, lines: bool) -> Result<Area<'a>, String> {
    root.fill(&WHITE).map_err(failed)?;
    let (top, body) = root.split_vertically(HEADER);
    let title = ("sans-serif", 17).into_font().style(FontStyle::Bold);
    top.draw(&Text::new(frame.title.clone(), (Y_LABELS as i32, 6), title))
        .map_err(failed)?;
    let text = TextStyle::from(("sans-serif", 13).into_font());
    let mut x = Y_LABELS as i32;
    for (i, name) in frame.series.iter().enumerate() {
        if lines {
            let stroke = colour(i, true).stroke_width(if i == 0 { 2 } else { 1 });
            top.draw(&PathElement::new([(x, 36), (x + 14, 36)], stroke))
        } else {
            top.draw(&Rectangle::new(
                [(x, 30), (x + 12, 42)],
                colour(i, false).filled(),
            ))
        }
        .map_err(failed)?;
        top.draw(&Text::new(name.clone(), (x + 18, 30), text.clone()))
            .map_err(failed)?;
        x += 18 + top.estimate_text_size(name, &text).map_err(failed)?.0 as i32 + 22;
    }
    Ok(body)
}

impl BarChart {
    pub(crate) fn svg(&self) -> Result<String, String> {
        let n_series = self.frame.series.len().max(1) as u32;
        let groups = self
            .panels
            .iter()
            .map(|(_, g)| g.len())
            .max()
            .unwrap_or(1)
            .max(1) as u32;
        let panel_width = groups * (n_series * BAR + GROUP_GAP) + GROUP_GAP;
        let panels = self.panels.len().max(1);
        let width = (Y_LABELS + panels as u32 * (panel_width + Y_LABELS / 2))
            .max(legend_width(&self.frame.series));
        let values = self
            .panels
            .iter()
            .flat_map(|(_, g)| g)
            .flat_map(|(_, v)| v.iter().flatten());
        let y_max = nice_ceiling(
            values
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max),
        );
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (width, HEADER + BAR_PANEL_HEIGHT))
                .into_drawing_area();
            let body = header(&root, &self.frame, false)?;
            for (i, (panel, area)) in self
                .panels
                .iter()
                .zip(&body.split_evenly((1, panels)))
                .enumerate()
            {
                self.draw_panel(area, panel, y_max, i == 0)?;
            }
            root.present().map_err(failed)?;
        }
        Ok(out)
    }

    /// Groups at x = 0, 1, 2 ... labelled under their middles, bars side by side within a
    /// group (together 80 % of its width), each with its value above it; the y axis named on
    /// the first panel only.
    fn draw_panel(
        &self,
        area: &Area<'_>,
        (title, groups): &BarPanel,
        y_max: f64,
        first: bool,
    ) -> Result<(), String> {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 15).into_font().style(FontStyle::Bold))
            .margin_right(8)
            .x_label_area_size(24)
            .y_label_area_size(if first { Y_LABELS } else { 8 })
            .build_cartesian_2d(0.0..groups.len().max(1) as f64, 0.0..y_max)
            .map_err(failed)?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .x_labels(0)
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID);
        mesh.y_labels(if first { Y_TICKS } else { 0 })
            .y_label_formatter(&|v| number(*v));
        if first {
            mesh.y_desc(&self.frame.y_unit);
        }
        mesh.draw().map_err(failed)?;
        let under =
            TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        let above = TextStyle::from(("sans-serif", 11).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        let slice = 0.8 / self.frame.series.len().max(1) as f64;
        for (g, (label, values)) in groups.iter().enumerate() {
            let label = EmptyElement::at((g as f64 + 0.5, 0.0))
                + Text::new(label.clone(), (0, 6), under.clone());
            chart.draw_series([label]).map_err(failed)?;
            for (i, v) in values.iter().enumerate() {
                let Some(v) = v.filter(|v| v.is_finite()) else {
                    continue;
                };
                let left = g as f64 + 0.1 + i as f64 * slice;
                let bar = Rectangle::new(
                    [(left, 0.0), (left + slice * 0.92, v)],
                    colour(i, false).filled(),
                );
                chart.draw_series([bar]).map_err(failed)?;
                chart
                    .draw_series([Text::new(
                        number(v),
                        (left + slice * 0.46, v),
                        above.clone(),
                    )])
                    .map_err(failed)?;
            }
        }
        Ok(())
    }
}

impl LineChart {
    /// The x range of every panel (all points and markers, widened to whole ticks) and the
    /// top of the y axis.
    fn ranges(&self) -> ((f64, f64), f64) {
        let points = || {
            self.panels
                .iter()
                .flat_map(|p| p.lines.iter().flatten())
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let markers = self
            .panels
            .iter()
            .flat_map(|p| p.markers.iter().map(|m| m.0));
        let xs = points()
            .map(|p| p.0)
            .chain(markers)
            .filter(|x| x.is_finite());
        let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        let (lo, hi) = match (lo.is_finite(), hi > lo) {
            (true, true) => (lo, hi),
            (true, false) => (lo, lo + 1.0),
            _ => (0.0, 1.0),
        };
        let step = round_up((hi - lo) / X_TICKS, &[1.0, 2.0, 5.0, 10.0]);
        let y_max = nice_ceiling(points().map(|p| p.1).fold(0.0, f64::max));
        (
            ((lo / step).floor() * step, (hi / step).ceil() * step),
            y_max,
        )
    }

    pub(crate) fn svg(&self) -> Result<String, String> {
        let empty = [LinePanel::default()];
        let shown = if self.panels.is_empty() {
            &empty[..]
        } else {
            &self.panels[..]
        };
        let width = LINE_PANEL.0.max(legend_width(&self.frame.series));
        let height = HEADER + shown.len() as u32 * LINE_PANEL.1 + 20;
        let ((x_min, x_max), y_max) = self.ranges();
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
            let body = header(&root, &self.frame, true)?;
            for (i, (panel, area)) in shown
                .iter()
                .zip(&body.split_evenly((shown.len(), 1)))
                .enumerate()
            {
                let last = i + 1 == shown.len();
                let mut chart = ChartBuilder::on(area)
                    .caption(
                        &panel.title,
                        ("sans-serif", 14).into_font().style(FontStyle::Bold),
                    )
                    .margin_right(16)
                    .x_label_area_size(if last { 40 } else { 22 })
                    .y_label_area_size(Y_LABELS)
                    .build_cartesian_2d(x_min..x_max, 0.0..y_max)
                    .map_err(failed)?;
                let mut mesh = chart.configure_mesh();
                mesh.light_line_style(TRANSPARENT)
                    .bold_line_style(GRID)
                    .x_labels(X_TICKS as usize + 1)
                    .y_labels(Y_TICKS);
                mesh.x_label_formatter(&|v| number(*v))
                    .y_label_formatter(&|v| number(*v))
                    .y_desc(&self.frame.y_unit);
                if last {
                    mesh.x_desc(&self.x_label);
                }
                mesh.draw().map_err(failed)?;
                for (i, line) in panel.lines.iter().enumerate() {
                    let points: Vec<(f64, f64)> = line
                        .iter()
                        .copied()
                        .filter(|(x, y)| x.is_finite() && y.is_finite())
                        .collect();
                    if points.is_empty() {
                        continue;
                    }
                    let style = colour(i, true).stroke_width(if i == 0 { 2 } else { 1 });
                    chart
                        .draw_series([PathElement::new(points, style)])
                        .map_err(failed)?;
                }
                // Labels of markers close together are stepped down, so they stay readable.
                let label_style = ("sans-serif", 12).into_font().color(&MARKER);
                for (i, (x, label)) in panel
                    .markers
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.0.is_finite())
                {
                    let line = DashedPathElement::new(
                        [(*x, 0.0), (*x, y_max)],
                        4,
                        3,
                        MARKER.stroke_width(1),
                    );
                    let text = EmptyElement::at((*x, y_max))
                        + Text::new(label.clone(), (4, 2 + 13 * i as i32), label_style.clone());
                    chart.draw_series([line]).map_err(failed)?;
                    chart.draw_series([text]).map_err(failed)?;
                }
            }
            root.present().map_err(failed)?;
        }
        Ok(out)
    }
}

/// A bar label or tick: no decimals from 100 up or for whole numbers, one otherwise.
fn number(v: f64) -> String {
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten at least `v` (1 for `v <= 0`): the axis
/// ends on a round number.
fn nice_ceiling(v: f64) -> f64 {
    round_up(v, &[1.0, 2.0, 2.5, 5.0, 10.0])
}

fn round_up(v: f64, mantissas: &[f64]) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    let fits = mantissas
        .iter()
        .map(|m| m * power)
        .find(|c| *c >= v * (1.0 - 1e-12));
    fits.unwrap_or(10.0 * power)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_name_every_series_and_value_on_round_axes() {
        assert_eq!(
            [0.0, 87.0, 239.0, 251.0, 0.3].map(nice_ceiling),
            [1.0, 100.0, 250.0, 500.0, 0.5]
        );
        assert_eq!(
            [number(59.54), number(200.0), number(-1e-12)],
            ["59.5", "200", "0"]
        );
        let frame = |series: &[&str]| Frame {
            title: "a < b".into(),
            series: series.iter().map(|s| s.to_string()).collect(),
            y_unit: "MB/s".into(),
        };
        let group = |label: &str, values: &[Option<f64>]| (label.to_string(), values.to_vec());
        let bars = BarChart {
            frame: frame(&["raw TCP", "smbcp"]),
            panels: vec![(
                "download".into(),
                vec![
                    group("1 link", &[Some(59.7), None]),
                    group("2 links", &[Some(200.0), Some(f64::NAN)]),
                ],
            )],
        };
        let svg = bars.svg().unwrap();
        for want in [
            ">a &lt; b<",
            ">raw TCP<",
            ">smbcp<",
            ">download<",
            ">2 links<",
            ">59.7<",
            ">MB/s<",
        ] {
            assert!(
                svg.replace(['\n', ' '], "")
                    .contains(&want.replace(' ', "")),
                "{want} in {svg}"
            );
        }
        // The legend's swatch and a bar per finite value.
        assert_eq!(svg.matches("fill=\"#9E9E9E\"").count(), 1 + 2, "{svg}");
        let lines = LineChart {
            frame: frame(&["aggregate", "link 1"]),
            x_label: "seconds from the fault".into(),
            panels: vec![LinePanel {
                title: "upload".into(),
                lines: vec![vec![(-2.0, 500.0), (f64::NAN, 1.0), (7.5, 90.0)]],
                markers: vec![(0.0, "fault".into()), (8.0, "link up".into())],
            }],
        };
        assert_eq!(lines.ranges(), ((-2.0, 8.0), 500.0));
        let svg = lines.svg().unwrap();
        assert!(
            svg.contains("link up")
                && svg.contains("seconds from the fault")
                && !svg.contains("NaN")
        );
    }
}
