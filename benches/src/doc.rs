//! Writing generated text into a Markdown document between marker comments, so a rerun
//! replaces its own section and leaves the prose around it alone.

use crate::Context;
use std::path::Path;

/// The marker pair of section `name`.
pub fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- smb-bench:{name}:begin (generated; edit outside the markers) -->"),
        format!("<!-- smb-bench:{name}:end -->"),
    )
}

/// `text` with the part between section `name`'s markers replaced by `body`. A section not
/// there yet is appended at the end, under `heading` when given (so it does not read as part
/// of the section before it).
pub fn replace_section(text: &str, name: &str, heading: Option<&str>, body: &str) -> String {
    let (begin, end) = markers(name);
    let body = body.trim_end();
    if let Some(start) = text.find(&begin) {
        let after = start + begin.len();
        if let Some(stop) = text[after..].find(&end) {
            let stop = after + stop;
            return format!("{}\n{body}\n{}", &text[..after], &text[stop..]);
        }
    }
    let mut out = text.trim_end().to_string();
    for part in heading
        .into_iter()
        .chain([format!("{begin}\n{body}\n{end}").as_str()])
    {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(part.trim_end());
    }
    out.push('\n');
    out
}

/// [`replace_section`] on the file at `path` (created if needed).
pub fn write_section(
    path: &Path,
    name: &str,
    heading: Option<&str>,
    body: &str,
) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    std::fs::write(path, replace_section(&text, name, heading, body)).ctx(path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_between_markers_and_keeps_prose() {
        let (b, e) = markers("results");
        let text = format!("intro\n{b}\nold table\n{e}\noutro\n");
        let out = replace_section(&text, "results", Some("## R"), "new table\n");
        assert_eq!(out, format!("intro\n{b}\nnew table\n{e}\noutro\n"));
        assert_eq!(
            replace_section(&out, "results", None, "newer"),
            format!("intro\n{b}\nnewer\n{e}\noutro\n")
        );
    }

    #[test]
    fn a_new_section_is_appended_once_under_its_heading() {
        let (b, e) = markers("f");
        assert_eq!(
            replace_section("prose\n", "f", None, "t"),
            format!("prose\n\n{b}\nt\n{e}\n")
        );
        let first = replace_section("prose\n", "f", Some("## F"), "t1");
        assert_eq!(first, format!("prose\n\n## F\n\n{b}\nt1\n{e}\n"));
        let again = replace_section(&first, "f", Some("## F"), "t2");
        assert_eq!(again, format!("prose\n\n## F\n\n{b}\nt2\n{e}\n"));
        assert_eq!(
            replace_section("", "f", None, "t"),
            format!("{b}\nt\n{e}\n")
        );
    }
}
