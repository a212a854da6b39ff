//! Markdown tables, padded so they read well in a terminal too.

/// A table: a header row and rows of cells (strings).
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers; a header starting with `>` is right-aligned (the
    /// `>` is not shown), as numbers should be.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers
                .iter()
                .map(|h| h.trim_start_matches('>').to_string())
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
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([self.headers[c].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(c, text)| {
                    if self.right[c] {
                        format!("{text:>w$}", w = widths[c])
                    } else {
                        format!("{text:<w$}", w = widths[c])
                    }
                })
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let rule: Vec<String> = widths
            .iter()
            .zip(&self.right)
            .map(|(w, right)| {
                if *right {
                    format!("{}:", "-".repeat(w - 1))
                } else {
                    "-".repeat(*w)
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_markdown() {
        let mut t = Table::new(&["name", ">MB/s"]);
        t.row(vec!["smbcp".into(), "1234.5".into()]);
        t.row(vec!["x".into()]);
        assert_eq!(
            t.markdown(),
            "| name  |   MB/s |\n| ----- | -----: |\n| smbcp | 1234.5 |\n| x     |        |\n"
        );
    }
}
