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

/// Renders every string in `value` (objects and arrays followed) with the fields `lookup` answers: a string
/// that is exactly one placeholder becomes the field's value with its own JSON type; in any other string each
/// placeholder is replaced by the field's text (a string as it is, another value as JSON). A malformed
/// placeholder, or one naming a field `lookup` does not have, is an error naming it.
pub fn render_value<'a>(
    value: &serde_json::Value,
    lookup: &dyn Fn(&str) -> Option<&'a serde_json::Value>,
) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    let field = |name: &str| lookup(name).ok_or_else(|| format!("no field {name:?} for {{{{{name}}}}}"));
    Ok(match value {
        Value::String(text) => {
            if let Some(name) = whole_placeholder(text) {
                return field(name).cloned();
            }
            let mut out = String::with_capacity(text.len());
            for piece in pieces(text)? {
                match piece {
                    Piece::Text(literal) => out.push_str(literal),
                    Piece::Placeholder(name) => match field(name)? {
                        Value::String(s) => out.push_str(s),
                        other => out.push_str(&other.to_string()),
                    },
                }
            }
            Value::String(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| render_value(item, lookup)).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| Ok((key.clone(), render_value(item, lookup)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
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

    #[test]
    fn renders_values_with_their_types() {
        use serde_json::json;
        let fields = json!({"player_id": 42, "name": "Ana", "vip": true});
        let lookup = |name: &str| fields.get(name);
        let config =
            json!({"player_id": "{{ player_id }}", "title": "Hi {{name}} ({{player_id}})", "tags": ["{{vip}}", 3]});
        assert_eq!(
            render_value(&config, &lookup).unwrap(),
            json!({"player_id": 42, "title": "Hi Ana (42)", "tags": [true, 3]})
        );
        assert!(render_value(&json!("{{nobody}}"), &lookup).unwrap_err().contains("nobody"));
        assert!(render_value(&json!("x {{oops"), &lookup).is_err());
    }
}
