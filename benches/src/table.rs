//! Markdown tables, padded so they read well in a terminal too, and the number formats of
//! their cells.

/// A table: a header row and rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers, separated by `|`; a header starting with `>` is
    /// right-aligned (the `>` is not shown), as numbers should be.
    pub fn new(headers: &str) -> Self {
        let headers: Vec<&str> = headers.split('|').map(str::trim).collect();
        Table {
            headers: headers
                .iter()
                .map(|h| h.trim_start_matches('>').into())
                .collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells are left empty, extra cells dropped).
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as GitHub-flavoured Markdown.
    pub fn markdown(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                let cells = self.rows.iter().map(|r| r[c].chars().count());
                cells
                    .chain([self.headers[c].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(widths.iter().zip(&self.right))
                .map(|(text, (&w, &right))| match right {
                    true => format!("{text:>w$}"),
                    false => format!("{text:<w$}"),
                })
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let rule: Vec<String> = widths
            .iter()
            .zip(&self.right)
            .map(|(&w, &right)| match right {
                true => format!("{}:", "-".repeat(w - 1)),
                false => "-".repeat(w),
            })
            .collect();
        let mut out = line(&self.headers);
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// `v` with `decimals` decimals, `-` for NaN (nothing measured).
pub fn num(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.decimals$}")
    }
}

/// `a / b` with three decimals, `-` when either is missing or `b` is 0.
pub fn ratio(a: f64, b: f64) -> String {
    match a / b {
        r if r.is_finite() => format!("{r:.3}"),
        _ => "-".into(),
    }
}

/// `lo-hi` with one decimal each.
pub fn range((lo, hi): (f64, f64)) -> String {
    format!("{}-{}", num(lo, 1), num(hi, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_markdown() {
        let mut t = Table::new("name | >MB/s");
        t.row(vec!["smbcp".into(), "1234.5".into()]);
        t.row(vec!["x".into()]);
        assert_eq!(
            t.markdown(),
            "| name  |   MB/s |\n| ----- | -----: |\n| smbcp | 1234.5 |\n| x     |        |\n"
        );
        assert_eq!(
            [num(f64::NAN, 1), ratio(1.0, 0.0), ratio(1.0, 3.0)],
            ["-", "-", "0.333"]
        );
    }
}
