//! `{{ name }}` placeholders in text: web-push templates and v2 flow configuration (action config, lookup
//! parameters) use the same syntax. A name is an identifier of at most 64 characters (letters, digits and `_`,
//! not starting with a digit); spaces inside the braces are ignored.

/// The pieces of a text: literals and `{{ name }}` placeholders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// Whether `name` can name a placeholder.
pub fn is_placeholder_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

/// Splits `text` into literals and placeholders; an unclosed `{{` or an invalid name is an error.
pub fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push(Piece::Text(&rest[..start]));
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or("has an unclosed {{")?;
        let name = after[..end].trim();
        if !is_placeholder_name(name) {
            return Err(format!("has an invalid placeholder {{{{{name}}}}}"));
        }
        out.push(Piece::Placeholder(name));
        rest = &after[end + 2..];
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// The placeholder names a text uses, in order.
pub fn used_placeholders(text: &str) -> Result<Vec<&str>, String> {
    Ok(pieces(text)?
        .into_iter()
        .filter_map(|p| match p {
            Piece::Placeholder(name) => Some(name),
            Piece::Text(_) => None,
        })
        .collect())
}

/// The name when `text` is exactly one placeholder (`"{{ player_id }}"`): such a value takes the field's own
/// type when rendered, not a string.
pub fn whole_placeholder(text: &str) -> Option<&str> {
    match pieces(text).ok()?.as_slice() {
        [Piece::Text(""), Piece::Placeholder(name), Piece::Text("")] => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_names() {
        assert_eq!(used_placeholders("Hi {{ first_name }}, {{game}}!").unwrap(), vec!["first_name", "game"]);
        assert!(used_placeholders("Hi {{first_name").is_err());
        assert!(used_placeholders("{{ 1x }}").is_err());
        assert_eq!(whole_placeholder("{{ player_id }}"), Some("player_id"));
        assert_eq!(whole_placeholder("id {{player_id}}"), None);
        assert_eq!(whole_placeholder("plain"), None);
    }
}
