//! Markdown tables, padded so they read well in a terminal too, and the number formats of
//! their cells.

/// A column of a table built by [`Table::of`]: its header (see [`Table::new`]) and its cell
/// for a row.
pub type Column<'a, T> = (&'a str, &'a dyn Fn(&T) -> String);

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

    /// A row per item of `rows`, its cells from `columns`.
    pub fn of<T>(rows: impl IntoIterator<Item = T>, columns: &[Column<'_, T>]) -> Self {
        let headers: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let mut t = Table::new(&headers.join("|"));
        for r in rows {
            t.row(columns.iter().map(|c| (c.1)(&r)).collect());
        }
        t
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
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let padded = |cells: &[String]| {
            let aligned = cells.iter().zip(widths.iter().zip(&self.right));
            line(
                aligned
                    .map(|(text, (&w, &right))| match right {
                        true => format!("{text:>w$}"),
                        false => format!("{text:<w$}"),
                    })
                    .collect(),
            )
        };
        let rule = widths
            .iter()
            .zip(&self.right)
            .map(|(&w, &right)| match right {
                true => format!("{}:", "-".repeat(w - 1)),
                false => "-".repeat(w),
            });
        let mut out = padded(&self.headers);
        out.push_str(&line(rule.collect()));
        for r in &self.rows {
            out.push_str(&padded(r));
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

/// `lo-hi` with `decimals` decimals each.
pub fn range((lo, hi): (f64, f64), decimals: usize) -> String {
    format!("{}-{}", num(lo, decimals), num(hi, decimals))
}

/// The cells of a Markdown table's rows below its header, for tests.
pub fn cells(markdown: &str) -> Vec<Vec<String>> {
    let row = |l: &str| {
        let cells: Vec<String> = l.split('|').map(|c| c.trim().to_string()).collect();
        cells[1..cells.len() - 1].to_vec()
    };
    markdown.lines().skip(2).map(row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_markdown() {
        let t = Table::of(
            [("smbcp", 1234.5), ("x", f64::NAN)],
            &[
                ("name", &|r: &(&str, f64)| r.0.into()),
                (">MB/s", &|r| num(r.1, 1)),
            ],
        );
        assert_eq!(
            t.markdown(),
            "| name  |   MB/s |\n| ----- | -----: |\n| smbcp | 1234.5 |\n| x     |      - |\n"
        );
        assert_eq!(cells(&t.markdown())[1], ["x", "-"]);
        assert_eq!(
            [ratio(1.0, 0.0), ratio(1.0, 3.0), range((1.0, 2.25), 1)],
            ["-", "0.333", "1.0-2.2"]
        );
    }
}
