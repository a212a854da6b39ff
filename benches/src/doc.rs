//! Writing generated text into a Markdown document between marker comments, so a rerun
//! replaces its own section and leaves the prose around it alone.

use std::path::Path;

/// The marker pair of section `name`.
pub fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- smb-bench:{name}:begin (generated; edit outside the markers) -->"),
        format!("<!-- smb-bench:{name}:end -->"),
    )
}

/// `text` with the part between section `name`'s markers replaced by `body`; when the markers
/// are missing the section is appended at the end.
pub fn replace_section(text: &str, name: &str, body: &str) -> String {
    let (begin, end) = markers(name);
    let body = body.trim_end();
    if let Some(start) = text.find(&begin) {
        let after_begin = start + begin.len();
        if let Some(stop) = text[after_begin..].find(&end) {
            let stop = after_begin + stop;
            return format!("{}\n{body}\n{}", &text[..after_begin], &text[stop..]);
        }
    }
    let mut out = text.trim_end().to_string();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(&format!("{begin}\n{body}\n{end}\n"));
    out
}

/// Like [`replace_section`], but a section that is not there yet is appended under
/// `heading` (e.g. `"## Failover"`), so it does not read as part of the section before it.
pub fn replace_section_under(text: &str, heading: &str, name: &str, body: &str) -> String {
    let (begin, _) = markers(name);
    if text.contains(&begin) {
        return replace_section(text, name, body);
    }
    let mut out = text.trim_end().to_string();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(heading.trim_end());
    out.push('\n');
    replace_section(&out, name, body)
}

/// Replaces section `name` of the file at `path` (creating the file if needed).
pub fn write_section(path: &Path, name: &str, body: &str) -> Result<(), String> {
    rewrite(path, |text| replace_section(text, name, body))
}

/// Replaces section `name` of the file at `path`, appending it under `heading` when the
/// file does not have it yet (see [`replace_section_under`]).
pub fn write_section_under(
    path: &Path,
    heading: &str,
    name: &str,
    body: &str,
) -> Result<(), String> {
    rewrite(path, |text| {
        replace_section_under(text, heading, name, body)
    })
}

fn rewrite(path: &Path, edit: impl FnOnce(&str) -> String) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    std::fs::write(path, edit(&text)).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_between_markers_and_keeps_prose() {
        let (b, e) = markers("results");
        let text = format!("intro\n{b}\nold table\n{e}\noutro\n");
        let out = replace_section(&text, "results", "new table\n");
        assert_eq!(out, format!("intro\n{b}\nnew table\n{e}\noutro\n"));
        // A second run replaces again instead of appending.
        assert_eq!(
            replace_section(&out, "results", "newer"),
            format!("intro\n{b}\nnewer\n{e}\noutro\n")
        );
    }

    #[test]
    fn appends_when_markers_are_missing() {
        let (b, e) = markers("sweep");
        assert_eq!(
            replace_section("prose\n", "sweep", "t"),
            format!("prose\n\n{b}\nt\n{e}\n")
        );
        assert_eq!(replace_section("", "sweep", "t"), format!("{b}\nt\n{e}\n"));
    }

    #[test]
    fn new_section_gets_its_heading_once() {
        let (b, e) = markers("failover");
        let first = replace_section_under("prose\n", "## Failover", "failover", "t1");
        assert_eq!(first, format!("prose\n\n## Failover\n\n{b}\nt1\n{e}\n"));
        // A rerun replaces the body and adds no second heading.
        let again = replace_section_under(&first, "## Failover", "failover", "t2");
        assert_eq!(again, format!("prose\n\n## Failover\n\n{b}\nt2\n{e}\n"));
        assert_eq!(
            replace_section_under("", "## F", "failover", "t"),
            format!("## F\n\n{b}\nt\n{e}\n")
        );
    }
}
