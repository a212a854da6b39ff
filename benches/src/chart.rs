//! The benchmark's charts, drawn by `plotters` into SVG text: a grouped bar chart (panels side
//! by side on one y scale, one bar per series in every group, the value printed on each bar)
//! and a line chart (panels stacked on shared x and y scales, one line per series, dashed
//! vertical markers for events).
//!
//! What is ours is only the description of a chart (the types below, filled in by
//! `multichannel` and `failover`), where the axes end, and a legend row above the panels that
//! names every series once for all of them. plotters is built with its SVG backend alone: it
//! writes text as `<text>` elements and only estimates their width, so no font is needed to
//! build or to run.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What every chart has around its panels: the title, the series the legend names (one
/// colour each) and the unit of the shared y axis.
#[derive(Debug, Clone)]
pub struct ChartFrame {
    /// Title above everything.
    pub title: String,
    /// Names of the series: bars in this order within a group; lines in this order, the
    /// first drawn thicker (e.g. the aggregate of the others).
    pub series: Vec<String>,
    /// Unit of the y axis, e.g. `"MB/s"`.
    pub y_unit: String,
}

/// A bar chart: panels side by side, sharing the frame's y axis.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Title, series and y unit.
    pub frame: ChartFrame,
    /// Panels, left to right.
    pub panels: Vec<Panel>,
}

/// One panel of a [`BarChart`], e.g. "download".
#[derive(Debug, Clone)]
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// Groups of bars, left to right.
    pub groups: Vec<Group>,
}

/// One group of bars, e.g. "2 links".
#[derive(Debug, Clone)]
pub struct Group {
    /// Label under the group.
    pub label: String,
    /// One value per series (`None` or not finite: no bar).
    pub values: Vec<Option<f64>>,
}

/// A line chart: panels stacked top to bottom. All panels share the x range and the y range,
/// so an event at the same x lines up across panels and heights compare directly.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Title, series and y unit.
    pub frame: ChartFrame,
    /// Label of the x axis, e.g. `"seconds from the fault"`.
    pub x_label: String,
    /// Panels, top to bottom.
    pub panels: Vec<LinePanel>,
}

/// One panel of a [`LineChart`], e.g. "download".
#[derive(Debug, Clone)]
pub struct LinePanel {
    /// Title above the panel.
    pub title: String,
    /// One list of (x, y) points per series, in series order (missing or empty: no line).
    /// Points with a non-finite coordinate are skipped.
    pub lines: Vec<Vec<(f64, f64)>>,
    /// Vertical lines marking events.
    pub markers: Vec<Marker>,
}

/// A vertical line at `x` with a label at its top, e.g. "fault".
#[derive(Debug, Clone)]
pub struct Marker {
    /// Where on the x axis.
    pub x: f64,
    /// Text next to the line.
    pub label: String,
}

/// Bar colours, one per series (cycled): grey for the reference (raw TCP), then plotters'
/// usual blue, orange, green ...
const BAR_COLOURS: [RGBColor; 6] = [
    RGBColor(0x9e, 0x9e, 0x9e),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
];
/// Line colours, one per series (cycled); the first (black) is the emphasised aggregate.
const LINE_COLOURS: [RGBColor; 7] = [
    RGBColor(0, 0, 0),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];
const MARKER_COLOUR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const GRID_COLOUR: RGBColor = RGBColor(0xe0, 0xe0, 0xe0);

/// Height of the title and legend rows above the panels, in pixels.
const HEADER: u32 = 50;
/// Left of the plots: room for the y labels and the unit.
const Y_LABEL_AREA: u32 = 56;
/// Bar chart: pixels per bar and between groups, height of the plot.
const BAR_WIDTH: u32 = 26;
const GROUP_GAP: u32 = 22;
const BAR_PANEL_HEIGHT: u32 = 330;
/// Line chart: size of one panel (title, plot and x labels).
const LINE_PANEL: (u32, u32) = (760, 260);
/// Aim for about this many x ticks on a line chart, and y ticks on both.
const X_TICKS: f64 = 10.0;
const Y_TICKS: usize = 6;

/// What drawing into a string can fail with, as text.
fn drawing_error(e: impl std::fmt::Display) -> String {
    format!("drawing the chart: {e}")
}

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> Result<String, String> {
        let n_series = self.frame.series.len().max(1) as u32;
        let groups = self
            .panels
            .iter()
            .map(|p| p.groups.len())
            .max()
            .unwrap_or(1);
        let panel_width = groups.max(1) as u32 * (n_series * BAR_WIDTH + GROUP_GAP) + GROUP_GAP;
        let panels = self.panels.len().max(1) as u32;
        let width = (Y_LABEL_AREA + panels * (panel_width + Y_LABEL_AREA / 2))
            .max(legend_width(&self.frame.series));
        let y_max = nice_ceiling(
            self.panels
                .iter()
                .flat_map(|p| &p.groups)
                .flat_map(|g| g.values.iter().flatten())
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max),
        );
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (width, HEADER + BAR_PANEL_HEIGHT))
                .into_drawing_area();
            let body = header(&root, &self.frame, Swatch::Square)?;
            let areas = body.split_evenly((1, self.panels.len().max(1)));
            for (i, (panel, area)) in self.panels.iter().zip(&areas).enumerate() {
                let unit = (i == 0).then_some(self.frame.y_unit.as_str());
                draw_bar_panel(area, panel, &self.frame, y_max, unit)?;
            }
            root.present().map_err(drawing_error)?;
        }
        Ok(out)
    }
}

/// One bar panel: the groups at x = 0, 1, 2 ... (labels at their middles), bars side by side
/// within a group, each with its value above it.
fn draw_bar_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
    frame: &ChartFrame,
    y_max: f64,
    unit: Option<&str>,
) -> Result<(), String> {
    let n = panel.groups.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(
            &panel.title,
            ("sans-serif", 15).into_font().style(FontStyle::Bold),
        )
        .margin_right(8)
        .x_label_area_size(24)
        .y_label_area_size(if unit.is_some() { Y_LABEL_AREA } else { 8 })
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(drawing_error)?;
    // The x axis has no ticks of its own: every group is labelled under its middle below.
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(0)
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID_COLOUR)
        .y_labels(Y_TICKS)
        .y_label_formatter(&|v| number(*v));
    if let Some(unit) = unit {
        mesh.y_desc(unit);
    } else {
        mesh.y_labels(0);
    }
    mesh.draw().map_err(drawing_error)?;
    let under =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, group) in panel.groups.iter().enumerate() {
        let label = EmptyElement::at((g as f64 + 0.5, 0.0))
            + Text::new(group.label.clone(), (0, 6), under.clone());
        chart.draw_series([label]).map_err(drawing_error)?;
    }

    // Bars take this share of a group's width, centred; each series gets an equal slice.
    let n_series = frame.series.len().max(1) as f64;
    let slice = 0.8 / n_series;
    for (g, group) in panel.groups.iter().enumerate() {
        for (i, v) in group.values.iter().enumerate() {
            let Some(v) = v.filter(|v| v.is_finite()) else {
                continue;
            };
            let left = g as f64 + 0.1 + i as f64 * slice;
            let colour = BAR_COLOURS[i % BAR_COLOURS.len()];
            let bar = Rectangle::new([(left, 0.0), (left + slice * 0.92, v)], colour.filled());
            let value = Text::new(
                number(v),
                (left + slice * 0.46, v),
                TextStyle::from(("sans-serif", 11).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            );
            chart.draw_series([bar]).map_err(drawing_error)?;
            chart.draw_series([value]).map_err(drawing_error)?;
        }
    }
    Ok(())
}

impl LineChart {
    /// The x range every panel shows (all points and markers, widened to whole ticks) and
    /// the y range (0 to a round number above the highest point).
    fn ranges(&self) -> ((f64, f64), f64) {
        let points = || {
            self.panels
                .iter()
                .flat_map(|p| p.lines.iter().flatten())
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        };
        let xs = points()
            .map(|(x, _)| *x)
            .chain(
                self.panels
                    .iter()
                    .flat_map(|p| p.markers.iter().map(|m| m.x)),
            )
            .filter(|x| x.is_finite());
        let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        let (lo, hi) = match (lo, hi) {
            (lo, hi) if lo.is_finite() && hi > lo => (lo, hi),
            (lo, _) if lo.is_finite() => (lo, lo + 1.0),
            _ => (0.0, 1.0),
        };
        let step = nice_step((hi - lo) / X_TICKS);
        let x = ((lo / step).floor() * step, (hi / step).ceil() * step);
        (
            x,
            nice_ceiling(points().map(|(_, y)| *y).fold(0.0, f64::max)),
        )
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> Result<String, String> {
        let panels = self.panels.len().max(1) as u32;
        let width = LINE_PANEL.0.max(legend_width(&self.frame.series));
        let height = HEADER + panels * LINE_PANEL.1 + 20;
        let ((x_min, x_max), y_max) = self.ranges();
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
            let body = header(&root, &self.frame, Swatch::Line)?;
            let empty = LinePanel {
                title: String::new(),
                lines: Vec::new(),
                markers: Vec::new(),
            };
            let shown: Vec<&LinePanel> = match self.panels.is_empty() {
                true => vec![&empty],
                false => self.panels.iter().collect(),
            };
            let areas = body.split_evenly((shown.len(), 1));
            for (i, (panel, area)) in shown.iter().zip(&areas).enumerate() {
                let mut chart = ChartBuilder::on(area)
                    .caption(
                        &panel.title,
                        ("sans-serif", 14).into_font().style(FontStyle::Bold),
                    )
                    .margin_right(16)
                    .x_label_area_size(if i + 1 == shown.len() { 40 } else { 22 })
                    .y_label_area_size(Y_LABEL_AREA)
                    .build_cartesian_2d(x_min..x_max, 0.0..y_max)
                    .map_err(drawing_error)?;
                let mut mesh = chart.configure_mesh();
                mesh.light_line_style(TRANSPARENT)
                    .bold_line_style(GRID_COLOUR)
                    .x_labels(X_TICKS as usize + 1)
                    .y_labels(Y_TICKS)
                    .x_label_formatter(&|v| number(*v))
                    .y_label_formatter(&|v| number(*v))
                    .y_desc(&self.frame.y_unit);
                // The x axis is named once, under the last panel.
                if i + 1 == shown.len() {
                    mesh.x_desc(&self.x_label);
                }
                mesh.draw().map_err(drawing_error)?;
                draw_lines(&mut chart, panel, y_max)?;
            }
            root.present().map_err(drawing_error)?;
        }
        Ok(out)
    }
}

type LinePlot<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's lines (the first, the aggregate, thicker), then its markers on top: a dashed
/// vertical line each, labelled at the top, labels of markers close together stepped down so
/// they stay readable.
fn draw_lines(chart: &mut LinePlot<'_, '_>, panel: &LinePanel, y_max: f64) -> Result<(), String> {
    for (i, line) in panel.lines.iter().enumerate() {
        let points: Vec<(f64, f64)> = line
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if points.is_empty() {
            continue;
        }
        let colour = LINE_COLOURS[i % LINE_COLOURS.len()];
        let width = if i == 0 { 2 } else { 1 };
        chart
            .draw_series([PathElement::new(points, colour.stroke_width(width))])
            .map_err(drawing_error)?;
    }
    let label_style = ("sans-serif", 12).into_font().color(&MARKER_COLOUR);
    for (i, marker) in panel.markers.iter().enumerate() {
        if !marker.x.is_finite() {
            continue;
        }
        let line = DashedPathElement::new(
            [(marker.x, 0.0), (marker.x, y_max)],
            4,
            3,
            MARKER_COLOUR.stroke_width(1),
        );
        let label = EmptyElement::at((marker.x, y_max))
            + Text::new(
                marker.label.clone(),
                (4, 2 + 13 * i as i32),
                label_style.clone(),
            );
        chart.draw_series([line]).map_err(drawing_error)?;
        chart.draw_series([label]).map_err(drawing_error)?;
    }
    Ok(())
}

/// How the legend shows a series: a filled square (bars) or a short stroke (lines).
#[derive(Clone, Copy)]
enum Swatch {
    Square,
    Line,
}

/// Room the legend row needs: swatch, name, gap per series, and the left margin.
fn legend_width(series: &[String]) -> u32 {
    let names: usize = series.iter().map(|s| s.chars().count()).sum();
    Y_LABEL_AREA + series.len() as u32 * 40 + names as u32 * 7
}

/// Paints the background, writes the title and the legend row, and returns the area below
/// them for the panels.
fn header<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    frame: &ChartFrame,
    swatch: Swatch,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>, String> {
    root.fill(&WHITE).map_err(drawing_error)?;
    let (top, body) = root.split_vertically(HEADER);
    let left = Y_LABEL_AREA as i32;
    let title = ("sans-serif", 17).into_font().style(FontStyle::Bold);
    top.draw(&Text::new(frame.title.clone(), (left, 6), title))
        .map_err(drawing_error)?;
    let text = TextStyle::from(("sans-serif", 13).into_font());
    let mut x = left;
    for (i, name) in frame.series.iter().enumerate() {
        match swatch {
            Swatch::Square => top.draw(&Rectangle::new(
                [(x, 30), (x + 12, 42)],
                BAR_COLOURS[i % BAR_COLOURS.len()].filled(),
            )),
            Swatch::Line => top.draw(&PathElement::new(
                [(x, 36), (x + 14, 36)],
                LINE_COLOURS[i % LINE_COLOURS.len()].stroke_width(if i == 0 { 2 } else { 1 }),
            )),
        }
        .map_err(drawing_error)?;
        top.draw(&Text::new(name.clone(), (x + 18, 30), text.clone()))
            .map_err(drawing_error)?;
        let (w, _) = top.estimate_text_size(name, &text).map_err(drawing_error)?;
        x += 18 + w as i32 + 22;
    }
    Ok(body)
}

/// A value as a bar label or tick: no decimals from 100 up or for whole numbers, one otherwise
/// (`-0` printed as `0`).
fn number(v: f64) -> String {
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `v` (1 for `v <= 0`): a tick
/// step that gives round tick values.
pub fn nice_step(v: f64) -> f64 {
    round_up(v, &[1.0, 2.0, 5.0, 10.0])
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten that is at least `v` (1 for `v <= 0`), so
/// the axis ends on a round number.
pub fn nice_ceiling(v: f64) -> f64 {
    round_up(v, &[1.0, 2.0, 2.5, 5.0, 10.0])
}

fn round_up(v: f64, mantissas: &[f64]) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    mantissas
        .iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_use_round_numbers() {
        // The y axis ends on 1, 2, 2.5 or 5 times a power of ten.
        let ceilings = [(0.0, 1.0), (f64::NAN, 1.0), (87.0, 100.0), (100.0, 100.0)];
        let more = [(101.0, 200.0), (239.0, 250.0), (251.0, 500.0), (0.3, 0.5)];
        for (v, want) in ceilings.into_iter().chain(more) {
            assert_eq!(nice_ceiling(v), want, "ceiling of {v}");
        }
        // X ticks step by 1, 2 or 5 times a power of ten.
        let steps = [(0.0, 1.0), (0.7, 1.0), (1.2, 2.0), (3.0, 5.0), (0.03, 0.05)];
        for (v, want) in steps.into_iter().chain([(20.0, 20.0)]) {
            assert_eq!(nice_step(v), want, "step for {v}");
        }
        assert_eq!(
            [number(59.54), number(200.0), number(-1e-12), number(120.4)],
            ["59.5", "200", "0", "120"]
        );
    }

    /// The text of every `<text>` element, in document order.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|rest| {
                let start = rest.find('>')? + 1;
                let end = rest.find("</text>")?;
                Some(rest[start..end].trim().to_string())
            })
            .collect()
    }

    #[test]
    fn bar_chart_shows_every_value_label_and_name() {
        let chart = BarChart {
            frame: ChartFrame {
                title: "a < b".into(),
                series: vec!["raw TCP".into(), "smbcp".into()],
                y_unit: "MB/s".into(),
            },
            panels: vec![
                Panel {
                    title: "download".into(),
                    groups: vec![
                        Group {
                            label: "1 link".into(),
                            values: vec![Some(59.7), Some(59.5)],
                        },
                        Group {
                            label: "2 links".into(),
                            values: vec![Some(119.4), None],
                        },
                    ],
                },
                Panel {
                    title: "upload".into(),
                    groups: vec![
                        Group {
                            label: "1 link".into(),
                            values: vec![Some(200.0), Some(f64::NAN)],
                        },
                        Group {
                            label: "2 links".into(),
                            values: vec![None, None],
                        },
                    ],
                },
            ],
        };
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let texts = texts(&svg);
        // Text is escaped, and written as text (no font is needed to draw it).
        assert!(texts.contains(&"a &lt; b".to_string()), "{texts:?}");
        for want in [
            "raw TCP", "smbcp", "download", "upload", "MB/s", "1 link", "2 links",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want} in {texts:?}");
        }
        // Four finite values: four value labels, and four bars in the series' colours.
        for want in ["59.7", "59.5", "119"] {
            assert_eq!(
                texts.iter().filter(|t| *t == want).count(),
                1,
                "{want}: {texts:?}"
            );
        }
        let bars = |colour: &str| svg.matches(&format!("fill=\"{colour}\"")).count();
        // The legend's swatch plus the bars.
        assert_eq!(bars("#9E9E9E"), 1 + 3, "{svg}");
        assert_eq!(bars("#1F77B4"), 1 + 1, "{svg}");
        // The axis goes to 200, the largest value (already round): 200 is the bar's label and
        // the top tick.
        assert_eq!(texts.iter().filter(|t| *t == "200").count(), 2, "{texts:?}");
    }

    fn line_chart() -> LineChart {
        LineChart {
            frame: ChartFrame {
                title: "rst: link 2 <reset>".into(),
                series: vec!["aggregate".into(), "link 1".into(), "link 2".into()],
                y_unit: "Mbit/s".into(),
            },
            x_label: "seconds from the fault".into(),
            panels: vec![
                LinePanel {
                    title: "download".into(),
                    lines: vec![
                        vec![(-2.0, 500.0), (0.0, 380.0), (3.0, 300.0)],
                        vec![(-2.0, 200.0), (0.0, 190.0), (f64::NAN, 5.0), (3.0, 300.0)],
                        // Link 2 goes quiet at the fault.
                        vec![(-2.0, 200.0), (0.0, 0.0)],
                    ],
                    markers: vec![Marker {
                        x: 0.0,
                        label: "fault".into(),
                    }],
                },
                LinePanel {
                    title: "upload".into(),
                    lines: vec![vec![(-1.0, 100.0), (7.5, 90.0)], Vec::new()],
                    markers: vec![
                        Marker {
                            x: 0.0,
                            label: "fault".into(),
                        },
                        Marker {
                            x: 8.0,
                            label: "link up".into(),
                        },
                    ],
                },
            ],
        }
    }

    #[test]
    fn line_chart_draws_every_line_marker_and_name() {
        let chart = line_chart();
        // x: -2 .. 8 (markers count), y: 0 .. 500 (already round).
        assert_eq!(chart.ranges(), ((-2.0, 8.0), 500.0));
        let svg = chart.svg().unwrap();
        let texts = texts(&svg);
        assert!(
            texts.contains(&"rst: link 2 &lt;reset&gt;".to_string()),
            "{texts:?}"
        );
        for want in [
            "aggregate",
            "link 1",
            "link 2",
            "download",
            "upload",
            "link up",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want} in {texts:?}");
        }
        assert_eq!(texts.iter().filter(|t| *t == "fault").count(), 2);
        // The x axis is named once; the y axis in every panel.
        assert_eq!(
            texts
                .iter()
                .filter(|t| *t == "seconds from the fault")
                .count(),
            1
        );
        assert_eq!(texts.iter().filter(|t| *t == "Mbit/s").count(), 2);
        // Four non-empty lines (the NaN point is skipped, the empty line not drawn), plus the
        // three legend strokes.
        let black = svg.matches("stroke=\"#000000\"").count();
        assert!(black >= 3, "{svg}");
        let polylines: Vec<&str> = svg
            .split("<polyline")
            .skip(1)
            .map(|p| &p[..p.find("/>").unwrap_or(p.len())])
            .collect();
        let link1 = polylines
            .iter()
            .find(|p| p.contains("#1F77B4") && p.matches(',').count() == 3)
            .expect("link 1's line of three points");
        assert!(!link1.contains("NaN"));
        // Markers: a dashed line each, so several segments in the marker colour.
        assert!(svg.matches("#D62728").count() >= 3 * 2, "{svg}");
    }

    #[test]
    fn an_empty_line_chart_still_renders() {
        let chart = LineChart {
            panels: Vec::new(),
            ..line_chart()
        };
        let svg = chart.svg().unwrap();
        assert!(texts(&svg).contains(&"seconds from the fault".to_string()));
    }
}
