//! A grouped bar chart written as plain SVG text: one or more panels side by side sharing a
//! y axis, each with groups of bars (one bar per series) and the value printed on every bar.
//! Small enough to write by hand, and the output is stable text that diffs well in git.

use std::fmt::Write;

/// A chart: series (one colour each, in the legend) and the panels that show them.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Title above everything.
    pub title: String,
    /// Unit of the y axis, e.g. `"MB/s"`.
    pub unit: String,
    /// Names of the series, in bar order within a group.
    pub series: Vec<String>,
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

const BAR_WIDTH: f64 = 26.0;
const GROUP_GAP: f64 = 22.0;
const PLOT_HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const TOP: f64 = 78.0;
const PANEL_GAP: f64 = 36.0;
const BOTTOM: f64 = 40.0;
const TICKS: usize = 5;

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> String {
        let n_series = self.series.len().max(1);
        let group_width = n_series as f64 * BAR_WIDTH + GROUP_GAP;
        let panel_widths: Vec<f64> = self
            .panels
            .iter()
            .map(|p| p.groups.len().max(1) as f64 * group_width + GROUP_GAP)
            .collect();
        let plots_width: f64 =
            panel_widths.iter().sum::<f64>() + PANEL_GAP * (self.panels.len().max(1) - 1) as f64;
        let legend_width: f64 = self.series.iter().map(|n| legend_item_width(n)).sum();
        let width = (LEFT + plots_width).max(LEFT + legend_width) + 20.0;
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
            r#"<text x="{x:.1}" y="20" font-size="14" font-weight="bold">{}</text>"#,
            escape(&self.title),
            x = LEFT
        );
        // Legend: one swatch and name per series.
        let mut lx = LEFT;
        for (i, name) in self.series.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"<rect x="{lx:.1}" y="30" width="12" height="12" fill="{}"/><text x="{tx:.1}" y="40">{}</text>"#,
                colour(i),
                escape(name),
                tx = lx + 16.0
            );
            lx += legend_item_width(name);
        }
        // Y axis: gridlines and tick labels across the whole plot width.
        for t in 0..=TICKS {
            let v = y_max * t as f64 / TICKS as f64;
            let ty = y(v);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT:.1}" y1="{ty:.1}" x2="{x2:.1}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{lx:.1}" y="{ly:.1}" text-anchor="end">{}</text>"##,
                number(v),
                x2 = LEFT + plots_width,
                lx = LEFT - 6.0,
                ly = ty + 4.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="14" y="{cy:.1}" transform="rotate(-90 14 {cy:.1})" text-anchor="middle">{}</text>"#,
            escape(&self.unit),
            cy = TOP + PLOT_HEIGHT / 2.0
        );
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
                        escape(self.series.get(i).map_or("", String::as_str)),
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
    fn axis_ends_on_round_numbers() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
        assert_eq!(nice_ceiling(87.0), 100.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
        assert_eq!(nice_ceiling(101.0), 200.0);
        assert_eq!(nice_ceiling(239.0), 250.0);
        assert_eq!(nice_ceiling(251.0), 500.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
    }

    #[test]
    fn draws_one_bar_per_value_with_its_label() {
        let chart = BarChart {
            title: "a < b".into(),
            unit: "MB/s".into(),
            series: vec!["raw TCP".into(), "smbcp".into()],
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
}
