//! [`Fields`]: a validator that reads typed fields out of a JSON object (a request body, a template) and collects
//! every problem, so one error names all offending fields at once. Templates validate with it here; the push-api
//! role's handlers validate their bodies with it.

use serde_json::{Map, Value};

use crate::error::{FieldError, WebPushError};

/// Reads fields of one JSON object, recording a [`FieldError`] per problem. Getters return `None` when the
/// field is absent or wrong (the error is recorded); [`Fields::finish`] turns the errors into one
/// [`WebPushError::Invalid`].
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    prefix: String,
    errors: Vec<FieldError>,
}

/// Longest accepted identifier-like string (tenant ids, event ids, ...).
pub const MAX_ID_LEN: usize = 256;

impl<'a> Fields<'a> {
    pub fn new(map: &'a Map<String, Value>) -> Self {
        Self { map, prefix: String::new(), errors: Vec::new() }
    }

    /// The field path as reported: `prefix.name`.
    pub fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        let field = self.path(field);
        self.errors.push(FieldError::new(field, message));
    }

    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// A present, non-null value.
    fn present(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// Rejects fields not in `known` (used on editor bodies, where a misspelt setting would otherwise be lost).
    pub fn deny_unknown(&mut self, known: &[&str]) {
        let unknown: Vec<String> = self.map.keys().filter(|k| !known.contains(&k.as_str())).cloned().collect();
        for key in unknown {
            self.error(&key, "unknown field");
        }
    }

    /// A required non-empty string of at most `max` characters.
    pub fn required_str(&mut self, name: &str, max: usize) -> Option<String> {
        match self.present(name) {
            None => {
                self.error(name, "is required");
                None
            }
            Some(_) => self.optional_str(name, max),
        }
    }

    /// An optional string (absent or null is `None`); present, it must be non-empty and at most `max` chars.
    pub fn optional_str(&mut self, name: &str, max: usize) -> Option<String> {
        if matches!(self.present(name)?, Value::String(s) if s.trim().is_empty()) {
            self.error(name, "must not be empty");
            return None;
        }
        self.optional_text(name, max)
    }

    /// A string that may be empty (free text such as a template description).
    pub fn optional_text(&mut self, name: &str, max: usize) -> Option<String> {
        match self.present(name)? {
            Value::String(s) if s.chars().count() > max => {
                self.error(name, format!("must be at most {max} characters"));
                None
            }
            Value::String(s) => Some(s.clone()),
            _ => {
                self.error(name, "must be a string");
                None
            }
        }
    }

    /// A required string that may be empty (free text such as a notification body).
    pub fn required_text(&mut self, name: &str, max: usize) -> Option<String> {
        if self.present(name).is_none() {
            self.error(name, "is required");
            return None;
        }
        self.optional_text(name, max)
    }

    /// A required integer.
    pub fn required_i64(&mut self, name: &str) -> Option<i64> {
        match self.present(name) {
            None => {
                self.error(name, "is required");
                None
            }
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(_) => {
                self.error(name, "must be an integer");
                None
            }
        }
    }

    /// A required player id: an integer above zero, or zero when `allow_zero` (dashboard smoke tests).
    pub fn player_id(&mut self, name: &str, allow_zero: bool) -> Option<i64> {
        let id = self.required_i64(name)?;
        if id > 0 || (id == 0 && allow_zero) {
            Some(id)
        } else {
            self.error(name, "must be a positive integer");
            None
        }
    }

    pub fn optional_bool(&mut self, name: &str) -> Option<bool> {
        match self.present(name)? {
            Value::Bool(b) => Some(*b),
            _ => {
                self.error(name, "must be a boolean");
                None
            }
        }
    }

    /// A required string that must be one of `allowed`.
    pub fn required_enum(&mut self, name: &str, allowed: &[&str]) -> Option<String> {
        let value = self.required_str(name, MAX_ID_LEN)?;
        if allowed.contains(&value.as_str()) {
            Some(value)
        } else {
            self.error(name, format!("must be one of {}", allowed.join(", ")));
            None
        }
    }

    /// A required ISO 8601 (RFC 3339) timestamp, returned as given.
    pub fn required_timestamp(&mut self, name: &str) -> Option<String> {
        let value = self.required_str(name, 64)?;
        if chrono::DateTime::parse_from_rfc3339(&value).is_ok() {
            Some(value)
        } else {
            self.error(name, "must be an ISO 8601 timestamp with a time zone, e.g. 2026-01-31T12:00:00Z");
            None
        }
    }

    pub fn optional_object(&mut self, name: &str) -> Option<&'a Map<String, Value>> {
        match self.present(name)? {
            Value::Object(map) => Some(map),
            _ => {
                self.error(name, "must be an object");
                None
            }
        }
    }

    pub fn required_object(&mut self, name: &str) -> Option<&'a Map<String, Value>> {
        if self.present(name).is_none() {
            self.error(name, "is required");
            return None;
        }
        self.optional_object(name)
    }

    pub fn optional_array(&mut self, name: &str) -> Option<&'a Vec<Value>> {
        match self.present(name)? {
            Value::Array(items) => Some(items),
            _ => {
                self.error(name, "must be an array");
                None
            }
        }
    }

    /// An optional map of string to string (placeholder values).
    pub fn optional_string_map(&mut self, name: &str) -> Option<Map<String, Value>> {
        let map = self.optional_object(name)?;
        let mut ok = true;
        for (key, value) in map {
            if !value.is_string() {
                self.error(&format!("{name}.{key}"), "must be a string");
                ok = false;
            }
        }
        ok.then(|| map.clone())
    }

    /// Validates a nested object with its own prefix; its errors join this one's.
    pub fn nested<T>(&mut self, name: &str, map: &Map<String, Value>, f: impl FnOnce(&mut Fields<'_>) -> T) -> T {
        let mut inner = Fields { map, prefix: self.path(name), errors: Vec::new() };
        let result = f(&mut inner);
        self.errors.extend(inner.errors);
        result
    }

    /// `Ok(())` when no problem was recorded, else [`WebPushError::Invalid`] naming them all.
    pub fn finish(self) -> Result<(), WebPushError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(WebPushError::Invalid(self.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors_of(body: Value, f: impl FnOnce(&mut Fields<'_>)) -> Vec<(String, String)> {
        let map = body.as_object().unwrap().clone();
        let mut fields = Fields::new(&map);
        f(&mut fields);
        fields.errors.into_iter().map(|e| (e.field, e.message)).collect()
    }

    #[test]
    fn every_problem_is_named() {
        let errors = errors_of(json!({ "a": "", "b": 1.5, "c": "x", "e": "yesterday", "n": { "m": 3 } }), |f| {
            f.required_str("a", 10);
            f.player_id("b", false);
            f.required_enum("c", &["opened", "read"]);
            f.required_str("d", 10);
            f.required_timestamp("e");
            let nested = f.required_object("n").unwrap();
            f.nested("n", nested, |inner| inner.required_str("m", 10));
        });
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["a", "b", "c", "d", "e", "n.m"], "{errors:?}");
        assert!(errors[2].1.contains("opened, read"));
    }

    #[test]
    fn player_ids() {
        for (value, allow_zero, ok) in [
            (json!(1), false, true),
            (json!(0), false, false),
            (json!(0), true, true),
            (json!(-3), true, false),
            (json!("7"), false, false),
            (json!(2.0), false, false),
        ] {
            let errors = errors_of(json!({ "player_id": value }), |f| {
                f.player_id("player_id", allow_zero);
            });
            assert_eq!(errors.is_empty(), ok, "{value} allow_zero={allow_zero}: {errors:?}");
        }
    }
}
