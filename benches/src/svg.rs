//! Charts written as plain SVG text: a grouped bar chart (one or more panels side by side
//! sharing a y axis, each with groups of bars, one bar per series, and the value printed on
//! every bar) and a line chart (panels stacked vertically sharing both axes, one polyline per
//! series, vertical markers for events). Small enough to write by hand, and the output is
//! stable text that diffs well in git.

use std::fmt::Write;

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

/// One panel, e.g. "download".
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
    /// One value per series (`None`: no bar).
    pub values: Vec<Option<f64>>,
}

/// Bar colours, one per series (cycled if there are more series).
const COLOURS: [&str; 6] = [
    "#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
];

// Layout in pixels. Both kinds of chart: the plots start LEFT of the edge (room for the y
// labels and the unit) and have TICKS + 1 gridlines.
const LEFT: f64 = 64.0;
const TICKS: usize = 5;
// The bar chart: every bar BAR_WIDTH wide, groups and panels apart by the gaps, one plot
// height below the title, legend and panel titles (TOP), the group labels below (BOTTOM).
const BAR_WIDTH: f64 = 26.0;
const GROUP_GAP: f64 = 22.0;
const PANEL_GAP: f64 = 36.0;
const PLOT_HEIGHT: f64 = 260.0;
const TOP: f64 = 78.0;
const BOTTOM: f64 = 40.0;

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let n_series = self.frame.series.len().max(1);
        let group_width = n_series as f64 * BAR_WIDTH + GROUP_GAP;
        let panel_widths: Vec<f64> = self
            .panels
            .iter()
            .map(|p| p.groups.len().max(1) as f64 * group_width + GROUP_GAP)
            .collect();
        let plots_width: f64 =
            panel_widths.iter().sum::<f64>() + PANEL_GAP * (self.panels.len().max(1) - 1) as f64;
        let width = (LEFT + plots_width).max(LEFT + self.frame.legend_width()) + 20.0;
        let height = TOP + PLOT_HEIGHT + BOTTOM;
        let top_value = self
            .panels
            .iter()
            .flat_map(|p| &p.groups)
            .flat_map(|g| g.values.iter().flatten())
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let y_max = nice_ceiling(top_value);
        let y = |v: f64| TOP + PLOT_HEIGHT - (v / y_max).clamp(0.0, 1.0) * PLOT_HEIGHT;

        // Legend: a square swatch per series.
        let mut out = self.frame.open(width, height, |i, x| {
            format!(
                r#"<rect x="{x:.1}" y="30" width="12" height="12" fill="{}"/>"#,
                colour(i)
            )
        });
        // Y axis: gridlines and tick labels across the whole plot width.
        self.frame
            .y_axis(&mut out, (LEFT, LEFT + plots_width), y_max, y);
        // Panels.
        let mut px = LEFT;
        for (panel, pw) in self.panels.iter().zip(&panel_widths) {
            let _ = writeln!(
                out,
                r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle" font-weight="bold">{}</text>"#,
                escape(&panel.title),
                cx = px + pw / 2.0,
                ty = TOP - 12.0
            );
            for (g, group) in panel.groups.iter().enumerate() {
                let gx = px + GROUP_GAP + g as f64 * group_width;
                for (i, value) in group.values.iter().enumerate() {
                    let Some(v) = value.filter(|v| v.is_finite()) else {
                        continue;
                    };
                    let bx = gx + i as f64 * BAR_WIDTH;
                    let by = y(v);
                    let _ = writeln!(
                        out,
                        r#"<rect x="{bx:.1}" y="{by:.1}" width="{bw:.1}" height="{bh:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                        colour(i),
                        escape(self.frame.series.get(i).map_or("", String::as_str)),
                        number(v),
                        bw = BAR_WIDTH - 2.0,
                        bh = TOP + PLOT_HEIGHT - by
                    );
                    let _ = writeln!(
                        out,
                        r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                        number(v),
                        tx = bx + (BAR_WIDTH - 2.0) / 2.0,
                        ty = by - 3.0
                    );
                }
                let _ = writeln!(
                    out,
                    r#"<text x="{cx:.1}" y="{ly:.1}" text-anchor="middle">{}</text>"#,
                    escape(&group.label),
                    cx = gx + n_series as f64 * BAR_WIDTH / 2.0,
                    ly = TOP + PLOT_HEIGHT + 16.0
                );
            }
            let _ = writeln!(
                out,
                r#"<line x1="{px:.1}" y1="{by:.1}" x2="{x2:.1}" y2="{by:.1}" stroke="black"/>"#,
                x2 = px + pw,
                by = TOP + PLOT_HEIGHT
            );
            px += pw + PANEL_GAP;
        }
        out.push_str("</svg>\n");
        out
    }
}

/// A line chart: one polyline per series in one or more panels stacked top to bottom. All
/// panels share the x range and the y range, so an event at the same x lines up across
/// panels and heights compare directly.
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

/// Line colours, one per series (cycled); the first (black) is the emphasised series.
const LINE_COLOURS: [&str; 7] = [
    "#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];
/// Where the parts of a line chart go, in pixels.
struct LineLayout {
    /// Size of one panel's plot area.
    plot_width: f64,
    panel_height: f64,
    /// Room above each panel for its title and marker labels.
    panel_header: f64,
    /// Room below each panel for the x tick labels.
    panel_footer: f64,
    /// Room for the title and legend above the first panel.
    top: f64,
    /// Room for the x label below the last panel.
    bottom: f64,
    /// Room right of the plots.
    right: f64,
}

impl LineLayout {
    /// From the top of one panel's header to the next one's.
    fn panel_stride(&self) -> f64 {
        self.panel_header + self.panel_height + self.panel_footer
    }
}

const LINE: LineLayout = LineLayout {
    plot_width: 680.0,
    panel_height: 200.0,
    panel_header: 34.0,
    panel_footer: 24.0,
    top: 52.0,
    bottom: 30.0,
    right: 20.0,
};
/// Aim for about this many x ticks.
const X_TICKS: f64 = 10.0;

/// Where the data of one panel goes: the plot rectangle and the value ranges it shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlotFrame {
    /// Left edge of the plot area in pixels.
    pub left: f64,
    /// Top edge of the plot area in pixels.
    pub top: f64,
    /// Width of the plot area in pixels.
    pub width: f64,
    /// Height of the plot area in pixels.
    pub height: f64,
    /// x value at the left edge.
    pub x_min: f64,
    /// x value at the right edge.
    pub x_max: f64,
    /// y value at the top edge (the bottom edge is 0).
    pub y_max: f64,
}

impl PlotFrame {
    /// The pixel position of the value (x, y); values outside the ranges are pinned to the
    /// edges so a stray point cannot draw outside the panel.
    pub fn to_px(&self, x: f64, y: f64) -> (f64, f64) {
        let fx = ((x - self.x_min) / (self.x_max - self.x_min)).clamp(0.0, 1.0);
        let fy = (y / self.y_max).clamp(0.0, 1.0);
        (
            self.left + fx * self.width,
            self.top + self.height - fy * self.height,
        )
    }
}

impl LineChart {
    /// The x range every panel shows: all points and markers, widened to whole ticks, and
    /// the tick step.
    fn x_range(&self) -> (f64, f64, f64) {
        let xs = self
            .panels
            .iter()
            .flat_map(|p| {
                p.lines
                    .iter()
                    .flatten()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .map(|(x, _)| *x)
                    .chain(p.markers.iter().map(|m| m.x).filter(|x| x.is_finite()))
            })
            .fold(None, |acc: Option<(f64, f64)>, x| match acc {
                None => Some((x, x)),
                Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
            });
        let (lo, hi) = match xs {
            Some((lo, hi)) if hi > lo => (lo, hi),
            Some((lo, _)) => (lo, lo + 1.0),
            None => (0.0, 1.0),
        };
        let step = nice_step((hi - lo) / X_TICKS);
        ((lo / step).floor() * step, (hi / step).ceil() * step, step)
    }

    /// The largest y of any drawn point, rounded up to a round number.
    fn y_max(&self) -> f64 {
        let top = self
            .panels
            .iter()
            .flat_map(|p| p.lines.iter().flatten())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(_, y)| *y)
            .fold(0.0, f64::max);
        nice_ceiling(top)
    }

    /// The frame of panel `i` (0 = top).
    pub fn frame(&self, i: usize) -> PlotFrame {
        let (x_min, x_max, _) = self.x_range();
        let stride = LINE.panel_stride();
        PlotFrame {
            left: LEFT,
            top: LINE.top + i as f64 * stride + LINE.panel_header,
            width: LINE.plot_width,
            height: LINE.panel_height,
            x_min,
            x_max,
            y_max: self.y_max(),
        }
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let panels = self.panels.len().max(1);
        let stride = LINE.panel_stride();
        // About 8 px per character of the 14 px bold title.
        let title_width = 8.0 * self.frame.title.chars().count() as f64;
        let width = (LEFT + LINE.plot_width)
            .max(LEFT + self.frame.legend_width())
            .max(LEFT + title_width)
            + LINE.right;
        let height = LINE.top + panels as f64 * stride + LINE.bottom;
        let (_, _, x_step) = self.x_range();

        // Legend: a short stroke in the line's colour per series.
        let mut out = self.frame.open(width, height, |i, x| {
            format!(
                r#"<line x1="{x:.1}" y1="36" x2="{x2:.1}" y2="36" stroke="{}" stroke-width="{}"/>"#,
                line_colour(i),
                line_width(i),
                x2 = x + 12.0
            )
        });
        for (p, panel) in self.panels.iter().enumerate() {
            let frame = self.frame(p);
            self.panel_svg(&mut out, panel, &frame, x_step);
        }
        if self.panels.is_empty() {
            let frame = self.frame(0);
            self.panel_svg(
                &mut out,
                &LinePanel {
                    title: String::new(),
                    lines: Vec::new(),
                    markers: Vec::new(),
                },
                &frame,
                x_step,
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{cx:.1}" y="{ly:.1}" text-anchor="middle">{}</text>"#,
            escape(&self.x_label),
            cx = LEFT + LINE.plot_width / 2.0,
            ly = height - 10.0
        );
        out.push_str("</svg>\n");
        out
    }

    /// One panel: title, grid and ticks, the lines, then the markers on top.
    fn panel_svg(&self, out: &mut String, panel: &LinePanel, f: &PlotFrame, x_step: f64) {
        let bottom = f.top + f.height;
        let right = f.left + f.width;
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{y:.1}" font-weight="bold">{}</text>"#,
            escape(&panel.title),
            x = f.left,
            y = f.top - LINE.panel_header + 14.0
        );
        self.frame
            .y_axis(out, (f.left, right), f.y_max, |v| f.to_px(f.x_min, v).1);
        // X ticks: a short mark and the value under the axis, a faint line at 0.
        let ticks = ((f.x_max - f.x_min) / x_step).round() as i64;
        for t in 0..=ticks.clamp(0, 1000) {
            let v = f.x_min + t as f64 * x_step;
            let (tx, _) = f.to_px(v, 0.0);
            let _ = writeln!(
                out,
                r#"<line x1="{tx:.1}" y1="{bottom:.1}" x2="{tx:.1}" y2="{y2:.1}" stroke="black"/><text x="{tx:.1}" y="{ly:.1}" text-anchor="middle">{}</text>"#,
                number(clean_zero(v)),
                y2 = bottom + 4.0,
                ly = bottom + 16.0
            );
        }
        let _ = writeln!(
            out,
            r#"<line x1="{x1:.1}" y1="{bottom:.1}" x2="{right:.1}" y2="{bottom:.1}" stroke="black"/><line x1="{x1:.1}" y1="{top:.1}" x2="{x1:.1}" y2="{bottom:.1}" stroke="black"/>"#,
            x1 = f.left,
            top = f.top
        );
        for (i, points) in panel.lines.iter().enumerate() {
            let coords: Vec<String> = points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| {
                    let (px, py) = f.to_px(x, y);
                    format!("{px:.1},{py:.1}")
                })
                .collect();
            if coords.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round" points="{}"><title>{}</title></polyline>"#,
                line_colour(i),
                line_width(i),
                coords.join(" "),
                escape(self.frame.series.get(i).map_or("", String::as_str))
            );
        }
        for m in panel.markers.iter().filter(|m| m.x.is_finite()) {
            let (mx, _) = f.to_px(m.x, 0.0);
            let _ = writeln!(
                out,
                r##"<line x1="{mx:.1}" y1="{top:.1}" x2="{mx:.1}" y2="{bottom:.1}" stroke="#d62728" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{ty:.1}" fill="#d62728">{}</text>"##,
                escape(&m.label),
                top = f.top - 4.0,
                tx = mx + 3.0,
                ty = f.top - 6.0
            );
        }
    }
}

impl ChartFrame {
    /// Room the legend takes.
    fn legend_width(&self) -> f64 {
        self.series.iter().map(|n| legend_item_width(n)).sum()
    }

    /// A new document of `width` x `height` px: the root element, a white background, the
    /// title, and the legend with the mark `swatch(i, x)` draws at x before each name. The
    /// caller closes it with `</svg>`.
    fn open(&self, width: f64, height: f64, swatch: impl Fn(usize, f64) -> String) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            out,
            r#"<rect width="{width:.0}" height="{height:.0}" fill="white"/>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{LEFT:.1}" y="20" font-size="14" font-weight="bold">{}</text>"#,
            escape(&self.title)
        );
        let mut x = LEFT;
        for (i, name) in self.series.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"{}<text x="{tx:.1}" y="40">{}</text>"#,
                swatch(i, x),
                escape(name),
                tx = x + 16.0
            );
            x += legend_item_width(name);
        }
        out
    }

    /// The y axis of a plot from `left` to `right`: gridlines at [`TICKS`] + 1 round values
    /// from 0 to `y_max`, each labelled left of the axis, and the unit written upwards beside
    /// them; `row` gives a value's pixel row.
    fn y_axis(
        &self,
        out: &mut String,
        (left, right): (f64, f64),
        y_max: f64,
        row: impl Fn(f64) -> f64,
    ) {
        for t in 0..=TICKS {
            let v = y_max * t as f64 / TICKS as f64;
            let ty = row(v);
            let _ = writeln!(
                out,
                r##"<line x1="{left:.1}" y1="{ty:.1}" x2="{right:.1}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{lx:.1}" y="{ly:.1}" text-anchor="end">{}</text>"##,
                number(v),
                lx = left - 6.0,
                ly = ty + 4.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="14" y="{cy:.1}" transform="rotate(-90 14 {cy:.1})" text-anchor="middle">{}</text>"#,
            escape(&self.y_unit),
            cy = (row(0.0) + row(y_max)) / 2.0
        );
    }
}

fn line_colour(i: usize) -> &'static str {
    LINE_COLOURS[i % LINE_COLOURS.len()]
}

fn line_width(i: usize) -> &'static str {
    if i == 0 {
        "2"
    } else {
        "1.2"
    }
}

/// `-0` printed as `0`.
fn clean_zero(v: f64) -> f64 {
    if v.abs() < 1e-9 {
        0.0
    } else {
        v
    }
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `v` (1 for `v <= 0`): a tick
/// step that gives round tick values.
pub fn nice_step(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

/// Room one legend entry takes: swatch, name (about 6.5 px per character at 11 px), gap.
fn legend_item_width(name: &str) -> f64 {
    16.0 + 6.5 * name.chars().count() as f64 + 18.0
}

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// A value as a bar label or tick: no decimals from 100 up or for whole numbers, one otherwise.
fn number(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten that is at least `v` (1 for `v <= 0`), so
/// the axis ends on a round number.
pub fn nice_ceiling(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

/// Text made safe for SVG (XML) content and attributes.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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
    }

    #[test]
    fn draws_one_bar_per_value_with_its_label() {
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
                    groups: vec![Group {
                        label: "1 link".into(),
                        values: vec![Some(200.0), Some(f64::NAN)],
                    }],
                },
            ],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        // Four finite values -> four bars (plus the background and two legend swatches).
        assert_eq!(svg.matches("<title>").count(), 4);
        assert!(svg.contains("<title>smbcp: 59.5</title>"));
        assert!(svg.contains("<title>raw TCP: 200</title>"));
        assert!(svg.contains("a &lt; b"));
        // Ticks every 40 up to 200, whole numbers without decimals.
        assert!(svg.contains(">40</text>"), "{svg}");
        // The axis goes to 200 (the largest value, already round): the 200 bar is full height.
        assert!(svg.contains(&format!(
            "height=\"{:.1}\" fill=\"{}\"><title>raw TCP: 200",
            PLOT_HEIGHT, COLOURS[0]
        )));
    }

    /// A small XML well-formedness check (enough for the SVG written here): tags nest and
    /// close, attribute values are quoted, `&` only starts the entities `escape` writes, and
    /// there is exactly one root. Returns how many elements of each name there are.
    fn check_xml(doc: &str) -> Result<std::collections::BTreeMap<String, usize>, String> {
        let mut counts = std::collections::BTreeMap::new();
        let mut stack: Vec<String> = Vec::new();
        let mut roots = 0;
        let mut rest = doc;
        let check_text = |text: &str| -> Result<(), String> {
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                if !["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| entity.starts_with(e))
                {
                    return Err(format!("bare & in {text:?}"));
                }
            }
            if text.contains('>') {
                return Err(format!("bare > in text {text:?}"));
            }
            Ok(())
        };
        while let Some(open) = rest.find('<') {
            check_text(&rest[..open])?;
            if stack.is_empty() && !rest[..open].trim().is_empty() {
                return Err("text outside the root".into());
            }
            let close = rest[open..].find('>').ok_or("unterminated tag")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(top) if top == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name = body.split_whitespace().next().ok_or("empty tag")?;
            if !name.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(format!("bad element name {name:?}"));
            }
            // Attributes: name="value" pairs, values without '<' or '"'.
            let mut attrs = body[name.len()..].trim();
            while !attrs.is_empty() {
                let eq = attrs
                    .find('=')
                    .ok_or(format!("attribute without value in {tag:?}"))?;
                let value = attrs[eq + 1..]
                    .strip_prefix('"')
                    .ok_or(format!("unquoted attribute in {tag:?}"))?;
                let end = value
                    .find('"')
                    .ok_or(format!("unterminated value in {tag:?}"))?;
                check_text(&value[..end])?;
                if value[..end].contains('<') {
                    return Err(format!("< in attribute of {tag:?}"));
                }
                attrs = value[end + 1..].trim_start();
            }
            if stack.is_empty() {
                roots += 1;
            }
            *counts.entry(name.to_string()).or_insert(0) += 1;
            if !self_closing {
                stack.push(name.to_string());
            }
        }
        check_text(rest)?;
        if !rest.trim().is_empty() {
            return Err("text after the root".into());
        }
        if !stack.is_empty() || roots != 1 {
            return Err(format!("unclosed {stack:?} or {roots} roots"));
        }
        Ok(counts)
    }

    /// The (x, y) pixel pairs of every polyline, in document order.
    fn polylines(doc: &str) -> Vec<Vec<(f64, f64)>> {
        doc.split("<polyline")
            .skip(1)
            .map(|rest| {
                let start = rest.find("points=\"").unwrap() + "points=\"".len();
                let end = start + rest[start..].find('"').unwrap();
                rest[start..end]
                    .split(' ')
                    .map(|pair| {
                        let (x, y) = pair.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
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
    fn line_chart_is_well_formed_svg() {
        let svg = line_chart().svg();
        let counts = check_xml(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert_eq!(counts["svg"], 1);
        // Four non-empty lines; the upload panel's empty second line is not drawn.
        assert_eq!(counts["polyline"], 4, "{svg}");
        assert!(svg.contains("rst: link 2 &lt;reset&gt;"));
        // Legend and line titles name the series.
        assert!(svg.contains("<title>link 2</title>"));
        assert!(svg.contains(">aggregate</text>"));
        // Markers: one in the first panel, two in the second, each labelled.
        assert_eq!(svg.matches("stroke-dasharray").count(), 3);
        assert!(svg.contains(">link up</text>"));
        // The broken checker must notice broken documents.
        assert!(check_xml("<svg><g></svg>").is_err());
        assert!(check_xml("<svg a=b/>").is_err());
        assert!(check_xml("<svg>&x</svg>").is_err());
        assert!(check_xml("<svg/><svg/>").is_err());
    }

    #[test]
    fn line_points_map_to_their_coordinates() {
        let chart = line_chart();
        // x: -2 .. 8 (markers count), step 1 for 10 units; y: 0 .. 500 (already round).
        let top = chart.frame(0);
        assert_eq!((top.x_min, top.x_max, top.y_max), (-2.0, 8.0, 500.0));
        let bottom = chart.frame(1);
        assert_eq!(bottom.left, top.left);
        assert!(bottom.top >= top.top + top.height + 30.0, "panels overlap");
        let lines = polylines(&chart.svg());
        let px = |f: &PlotFrame, x: f64, y: f64| {
            (
                f.left + (x + 2.0) / 10.0 * f.width,
                f.top + f.height - y / 500.0 * f.height,
            )
        };
        let near = |a: (f64, f64), b: (f64, f64)| {
            assert!(
                (a.0 - b.0).abs() <= 0.051 && (a.1 - b.1).abs() <= 0.051,
                "{a:?} != {b:?}"
            )
        };
        // The aggregate: first point at the top-left corner of the plot.
        near(lines[0][0], (top.left, top.top));
        near(lines[0][1], px(&top, 0.0, 380.0));
        near(lines[0][2], px(&top, 3.0, 300.0));
        // The NaN point of link 1 is skipped.
        assert_eq!(lines[1].len(), 3);
        near(lines[1][2], px(&top, 3.0, 300.0));
        // Link 2 drops to the x axis at 0.
        near(
            lines[2][1],
            (top.left + 0.2 * top.width, top.top + top.height),
        );
        // The upload panel uses its own frame (lower on the page), same scales.
        near(lines[3][0], px(&bottom, -1.0, 100.0));
        near(lines[3][1], px(&bottom, 7.5, 90.0));
        assert_eq!(
            chart.frame(0).to_px(100.0, -5.0),
            (top.left + top.width, top.top + top.height)
        );
    }
}
