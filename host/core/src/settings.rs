//! Settings declared once.
//!
//! Every section of the configuration declares its settings in one table of [`Setting`]s, written with the
//! [`settings!`](crate::settings!) macro: the environment variable, the path in the configuration file, one line
//! of documentation, and optionally a parser (default: [`FromSetting`]), bounds and the default as the
//! documentation should say it. From that table come:
//! - loading: [`apply_env`] sets each field from its environment variable (an empty value is no value);
//! - validation: [`check`] holds each field, from the file or the environment, to its bounds;
//! - documentation: [`markdown_rows`] renders the section's rows of the table in docs/configuration.md, and a
//!   test fails when that page and the declarations differ.
//!
//! A section's rules that tie several settings together (a retention at least another one, a secret that needs
//! its companion) stay in its `validate`.

use std::fmt::Display;
use std::path::PathBuf;

use serde::Serialize;

use crate::secret::Secret;

/// A setting that could not be used; the message names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        Self { setting: setting.into(), message: message.into() }
    }
}

/// One setting of section `S` (see the module documentation).
pub struct Setting<S: 'static> {
    /// The environment variable; empty for a setting of the configuration file only.
    pub env: &'static str,
    /// The path in the configuration file (`engine.batch_size`).
    pub path: &'static str,
    /// One line for the documentation's table.
    pub doc: &'static str,
    /// The default as the documentation says it, when the default value alone would not say what it means
    /// (`unset (embedded)`).
    pub shown_default: Option<&'static str>,
    /// The bounds, as the documentation says them (`1 to 1024`).
    pub bounds: fn() -> Option<String>,
    /// Sets the field from a non-empty environment value; the error is the reason, without the value.
    pub apply: fn(&mut S, &str) -> Result<(), String>,
    /// Holds the field to its bounds.
    pub check: fn(&S) -> Result<(), String>,
    /// The field's value as the documentation shows it.
    pub current: fn(&S) -> String,
}

impl<S> std::fmt::Debug for Setting<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setting").field("env", &self.env).field("path", &self.path).finish_non_exhaustive()
    }
}

impl<S> Setting<S> {
    /// The name errors give: the environment variable, or the file's path for a file-only setting.
    pub fn name(&self) -> &'static str {
        if self.env.is_empty() {
            self.path
        } else {
            self.env
        }
    }
}

/// Sets every field of `section` whose environment variable `env` gives a non-empty value. An unparsable
/// value names its variable and quotes the value: only numbers, booleans, keywords and lists can fail to
/// parse, never a text or a secret (which are taken as given), so no secret is ever quoted.
pub fn apply_env<S>(
    section: &mut S,
    settings: &[Setting<S>],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    for setting in settings.iter().filter(|setting| !setting.env.is_empty()) {
        let Some(value) = env(setting.env).filter(|value| !value.trim().is_empty()) else { continue };
        (setting.apply)(section, &value)
            .map_err(|reason| ConfigError::new(setting.env, format!("{value:?}: {reason}")))?;
    }
    Ok(())
}

/// Holds every field of `section` to its declared bounds; the first one outside names its setting.
pub fn check<S>(section: &S, settings: &[Setting<S>]) -> Result<(), ConfigError> {
    for setting in settings {
        (setting.check)(section).map_err(|message| ConfigError::new(setting.name(), message))?;
    }
    Ok(())
}

/// The rows of the documentation's configuration table for one section, from its declarations and its
/// defaults: `| file path | environment | default | bounds | meaning |`.
pub fn markdown_rows<S: Default>(settings: &[Setting<S>]) -> String {
    let defaults = S::default();
    let mut rows = String::new();
    for setting in settings {
        let env = if setting.env.is_empty() { "(file only)".to_owned() } else { format!("`{}`", setting.env) };
        let default = match setting.shown_default {
            Some(shown) => shown.to_owned(),
            None => (setting.current)(&defaults),
        };
        let bounds = (setting.bounds)().unwrap_or_default();
        rows.push_str(&format!("| `{}` | {env} | {default} | {bounds} | {} |\n", setting.path, setting.doc));
    }
    rows
}

/// A value as the documentation's table shows it: `unset`, `empty`, `none`, or the value in backticks.
pub fn show<T: Serialize>(value: &T) -> String {
    use serde_json::Value;
    match serde_json::to_value(value) {
        Ok(Value::Null) => "unset".to_owned(),
        Ok(Value::String(text)) if text.is_empty() => "empty".to_owned(),
        Ok(Value::String(text)) => format!("`{text}`"),
        Ok(Value::Array(items)) if items.is_empty() => "empty".to_owned(),
        Ok(Value::Array(items)) => {
            let items: Vec<String> = items
                .iter()
                .map(|item| match item {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect();
            format!("`{}`", items.join(","))
        }
        Ok(Value::Object(map)) if map.is_empty() => "none".to_owned(),
        Ok(other) => format!("`{other}`"),
        Err(_) => "(see the section)".to_owned(),
    }
}

/// How a setting's type reads an environment value (trimmed, except a secret, which is taken as given).
pub trait FromSetting: Sized {
    fn from_setting(value: &str) -> Result<Self, String>;
}

impl FromSetting for String {
    fn from_setting(value: &str) -> Result<Self, String> {
        Ok(value.trim().to_owned())
    }
}

impl FromSetting for PathBuf {
    fn from_setting(value: &str) -> Result<Self, String> {
        Ok(PathBuf::from(value.trim()))
    }
}

impl FromSetting for Secret {
    fn from_setting(value: &str) -> Result<Self, String> {
        Ok(Secret::new(value))
    }
}

impl FromSetting for bool {
    fn from_setting(value: &str) -> Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err("use true or false".to_owned()),
        }
    }
}

macro_rules! from_str_settings {
    ($($ty:ty),*) => {$(
        impl FromSetting for $ty {
            fn from_setting(value: &str) -> Result<Self, String> {
                value.trim().parse().map_err(|error: <$ty as std::str::FromStr>::Err| error.to_string())
            }
        }
    )*};
}
from_str_settings!(u16, u32, u64, usize, i16, i32, i64, f64);

impl<T: FromSetting> FromSetting for Option<T> {
    fn from_setting(value: &str) -> Result<Self, String> {
        T::from_setting(value).map(Some)
    }
}

/// A comma-separated list, each item trimmed, empty items dropped.
impl<T: FromSetting> FromSetting for Vec<T> {
    fn from_setting(value: &str) -> Result<Self, String> {
        split_list(value).iter().map(|item| T::from_setting(item)).collect()
    }
}

/// `key=value` pairs, comma-separated.
impl FromSetting for std::collections::BTreeMap<String, String> {
    fn from_setting(value: &str) -> Result<Self, String> {
        split_list(value)
            .iter()
            .map(|pair| match pair.split_once('=') {
                Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.trim().to_owned())),
                _ => Err(format!("{pair:?}: write key=value")),
            })
            .collect()
    }
}

/// A comma-separated list, trimmed, empty items dropped.
pub fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect()
}

/// One of an enum's keywords, as its file form spells them (`native`, `json`, `failed`): the error lists them.
pub fn keyword<T: serde::de::DeserializeOwned>(value: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(value.trim().to_owned())).map_err(|error| error.to_string())
}

/// A value parsed with its type's `FromStr` (an enum with its own keywords, e.g. a channel).
pub fn from_str<T: std::str::FromStr>(value: &str) -> Result<T, String>
where
    T::Err: Display,
{
    value.trim().parse().map_err(|error: T::Err| error.to_string())
}

/// Bounds: from `low` to `high`, both included.
#[derive(Debug, Clone, Copy)]
pub struct Between<T>(pub T, pub T);

/// The bounds `low..=high`.
pub fn between<T>(low: T, high: T) -> Between<T> {
    Between(low, high)
}

impl<T: PartialOrd + Display> Between<T> {
    pub fn check(&self, value: &T) -> Result<(), String> {
        if *value >= self.0 && *value <= self.1 {
            Ok(())
        } else {
            Err(format!("must be between {} and {} (not {value})", self.0, self.1))
        }
    }

    pub fn describe(&self) -> String {
        format!("{} to {}", self.0, self.1)
    }
}

/// Bounds: at least `low`.
#[derive(Debug, Clone, Copy)]
pub struct AtLeast<T>(pub T);

/// The bounds `low..`.
pub fn at_least<T>(low: T) -> AtLeast<T> {
    AtLeast(low)
}

impl<T: PartialOrd + Display> AtLeast<T> {
    pub fn check(&self, value: &T) -> Result<(), String> {
        if *value >= self.0 {
            Ok(())
        } else {
            Err(format!("must be at least {}", self.0))
        }
    }

    pub fn describe(&self) -> String {
        format!("at least {}", self.0)
    }
}

/// Bounds that are a rule of their own, with the words the documentation gives it.
pub struct Rule<T: ?Sized + 'static> {
    pub check: fn(&T) -> Result<(), String>,
    pub text: &'static str,
}

/// The rule `check`, documented as `text`.
pub fn rule<T: ?Sized>(check: fn(&T) -> Result<(), String>, text: &'static str) -> Rule<T> {
    Rule { check, text }
}

impl<T: ?Sized> Rule<T> {
    pub fn check(&self, value: &T) -> Result<(), String> {
        (self.check)(value)
    }

    pub fn describe(&self) -> String {
        self.text.to_owned()
    }
}

/// A text that must not be empty (a consumer group, a topic).
pub fn not_empty() -> Rule<str> {
    rule(|value: &str| if value.trim().is_empty() { Err("must not be empty".to_owned()) } else { Ok(()) }, "not empty")
}

/// A topic name Flowhost may create (see `ports::check_topic_name`).
pub fn topic_name() -> Rule<str> {
    rule(|value: &str| crate::ports::check_topic_name(value).map_err(|error| error.to_string()), "a topic name")
}

/// An optional value that must not be empty or blank when given.
pub fn not_blank() -> Rule<Option<String>> {
    rule(
        |value: &Option<String>| match value {
            Some(text) if text.trim().is_empty() => Err("must not be empty when given".to_owned()),
            _ => Ok(()),
        },
        "not empty when given",
    )
}

/// Declares a section's settings: `settings!(Section, "prefix.", [{ "ENV", field.path, "doc", parse: f,
/// check: bounds, default: "shown" }, ...])`, each option optional and in that order. Gives a
/// `&'static [Setting<Section>]`; see the module documentation.
#[macro_export]
macro_rules! settings {
    ($section:ty, $prefix:literal, [$({
        $env:literal, $first:ident $(. $rest:ident)*, $doc:literal
        $(, parse: $parse:expr)? $(, check: $check:expr)? $(, default: $shown:literal)? $(,)?
    }),* $(,)?]) => {
        &[$($crate::settings::Setting::<$section> {
            env: $env,
            path: concat!($prefix, stringify!($first) $(, ".", stringify!($rest))*),
            doc: $doc,
            shown_default: $crate::__setting_option!($($shown)?),
            bounds: || $crate::__setting_bounds!($($check)?),
            apply: |section: &mut $section, value: &str| -> Result<(), String> {
                section.$first $(.$rest)* = $crate::__setting_parse!(value $(, $parse)?)?;
                Ok(())
            },
            check: |section: &$section| -> Result<(), String> {
                $crate::__setting_check!(&section.$first $(.$rest)* $(, $check)?)
            },
            current: |section: &$section| $crate::settings::show(&section.$first $(.$rest)*),
        }),*]
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __setting_option {
    () => {
        None
    };
    ($shown:literal) => {
        Some($shown)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __setting_bounds {
    () => {
        None
    };
    ($check:expr) => {{
        let text = ($check).describe();
        (!text.is_empty()).then_some(text)
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __setting_parse {
    ($value:ident) => {
        $crate::settings::FromSetting::from_setting($value)
    };
    ($value:ident, $parse:expr) => {{
        let parsed: Result<_, String> = ($parse)($value);
        parsed
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __setting_check {
    ($field:expr) => {{
        let _ = $field;
        Ok(())
    }};
    ($field:expr, $check:expr) => {
        ($check).check($field)
    };
}

/// One setting whose value may instead be named in the secret store: the literal wins when set, else the
/// secret its `*_SECRET_NAME` names is read at start (`Config::resolve_secrets`).
pub struct SecretSetting<S: 'static> {
    /// The literal's environment variable (`FLOWHOST_REDIS_URL`).
    pub literal: &'static str,
    /// The secret-name environment variable (`FLOWHOST_REDIS_URL_SECRET_NAME`).
    pub setting: &'static str,
    /// The secret's name, when one is configured.
    pub secret_name: fn(&S) -> Option<String>,
    /// Whether the value is still wanted: the literal is unset (and nothing earlier in the order made it moot).
    pub needed: fn(&S) -> bool,
    /// Puts the value read from the store in the literal's place.
    pub fill: fn(&mut S, Secret),
}

impl<S> std::fmt::Debug for SecretSetting<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSetting").field("literal", &self.literal).field("setting", &self.setting).finish()
    }
}

/// What a secret read from the store becomes in its literal's place: the secret itself, or its text (a value
/// that is not secret once known, such as a VAPID public key or a Redis host).
pub trait FromSecret {
    fn from_secret(secret: Secret) -> Self;
}

impl FromSecret for Secret {
    fn from_secret(secret: Secret) -> Self {
        secret
    }
}

impl FromSecret for String {
    fn from_secret(secret: Secret) -> Self {
        secret.expose().to_owned()
    }
}

/// The usual [`SecretSetting`] of section `S`: `secret_setting!(S, "LITERAL", literal.field, name.field)` is
/// wanted while its literal field is unset, reads the secret its name field names, and is set as
/// `LITERAL_SECRET_NAME`.
#[macro_export]
macro_rules! secret_setting {
    ($section:ty, $literal:literal, $($field:ident).+, $($name:ident).+) => {
        $crate::settings::SecretSetting::<$section> {
            literal: $literal,
            setting: concat!($literal, "_SECRET_NAME"),
            secret_name: |section| section.$($name).+.clone(),
            needed: |section| section.$($field).+.is_none(),
            fill: |section, value| section.$($field).+ = Some($crate::settings::FromSecret::from_secret(value)),
        }
    };
}

/// A secret setting still to be read from the store: its two variables and the secret's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSecret {
    pub literal: &'static str,
    pub setting: &'static str,
    pub name: String,
}

/// The settings of `secrets` still to be read for `section`, in order.
pub fn pending<S>(section: &S, secrets: &[SecretSetting<S>]) -> Vec<PendingSecret> {
    secrets
        .iter()
        .filter(|secret| (secret.needed)(section))
        .filter_map(|secret| {
            (secret.secret_name)(section).map(|name| PendingSecret {
                literal: secret.literal,
                setting: secret.setting,
                name,
            })
        })
        .collect()
}

/// A role's section of the configuration: its own table in the file (`[engine]`), its settings, and the rules
/// that tie them together. The role's crate defines it (`host/<role>/src/config.rs`) and names it in its `Role`;
/// the process's configuration holds the sections of the roles the binary knows (`Config::section`).
pub trait Section:
    std::any::Any
    + Clone
    + Default
    + std::fmt::Debug
    + PartialEq
    + Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The section's table in the configuration file, and the first part of its settings' paths.
    const NAME: &'static str;
    /// The page in `docs/` that holds its settings' table.
    const PAGE: &'static str;
    /// Its settings.
    fn settings() -> &'static [Setting<Self>];
    /// Its settings whose value may be named in the secret store, in the order they are read.
    fn secrets() -> &'static [SecretSetting<Self>] {
        &[]
    }
    /// The rules that tie its settings together; each setting's bounds are checked before.
    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// A section behind a pointer: what [`Sections`] keeps.
trait AnySection: Send + Sync + std::fmt::Debug {
    fn as_any(&self) -> &dyn std::any::Any;
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    fn clone_box(&self) -> Box<dyn AnySection>;
    fn equals(&self, other: &dyn AnySection) -> bool;
    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError>;
    fn validate(&self) -> Result<(), ConfigError>;
    fn pending(&self) -> Vec<PendingSecret>;
    fn fill(&mut self, setting: &str, value: Secret);
}

impl<T: Section> AnySection for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn clone_box(&self) -> Box<dyn AnySection> {
        Box::new(self.clone())
    }
    fn equals(&self, other: &dyn AnySection) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        apply_env(self, T::settings(), env)
    }
    fn validate(&self) -> Result<(), ConfigError> {
        check(self, T::settings())?;
        Section::validate(self)
    }
    fn pending(&self) -> Vec<PendingSecret> {
        pending(self, T::secrets())
    }
    fn fill(&mut self, setting: &str, value: Secret) {
        if let Some(secret) = T::secrets().iter().find(|secret| secret.setting == setting) {
            (secret.fill)(self, value);
        }
    }
}

/// A section as a value, for the binary's table of roles: loading reads each known section's table from the
/// file, and the documentation test renders each one's settings.
#[derive(Clone, Copy)]
pub struct SectionEntry {
    pub name: &'static str,
    pub page: &'static str,
    /// The section's rows of its page's settings table (see [`markdown_rows`]).
    pub documentation: fn() -> String,
    default: fn() -> Box<dyn AnySection>,
    parse: fn(toml::Value) -> Result<Box<dyn AnySection>, String>,
}

impl std::fmt::Debug for SectionEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SectionEntry").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SectionEntry {
    /// The entry of section `T`.
    pub const fn of<T: Section>() -> SectionEntry {
        SectionEntry {
            name: T::NAME,
            page: T::PAGE,
            documentation: documentation_of::<T>,
            default: default_of::<T>,
            parse: parse_of::<T>,
        }
    }
}

fn documentation_of<T: Section>() -> String {
    markdown_rows(T::settings())
}

fn default_of<T: Section>() -> Box<dyn AnySection> {
    Box::new(T::default())
}

fn parse_of<T: Section>(value: toml::Value) -> Result<Box<dyn AnySection>, String> {
    value.try_into::<T>().map(|section| Box::new(section) as Box<dyn AnySection>).map_err(|error| error.to_string())
}

/// The roles' sections of one configuration, in the order they were added (the order secrets are read in).
#[derive(Default)]
pub struct Sections(Vec<(&'static str, Box<dyn AnySection>)>);

impl Clone for Sections {
    fn clone(&self) -> Self {
        Sections(self.0.iter().map(|(name, section)| (*name, section.clone_box())).collect())
    }
}

impl PartialEq for Sections {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().all(|(name, section)| {
                other.0.iter().any(|(other_name, other_section)| name == other_name && section.equals(&**other_section))
            })
    }
}

impl std::fmt::Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(name, section)| (name, section))).finish()
    }
}

impl Sections {
    /// Section `T`, if this configuration has it.
    pub fn get<T: Section>(&self) -> Option<&T> {
        self.0.iter().find(|(name, _)| *name == T::NAME).and_then(|(_, section)| section.as_any().downcast_ref())
    }

    /// Section `T`, added with its defaults when missing.
    pub fn get_mut<T: Section>(&mut self) -> &mut T {
        let at = match self.0.iter().position(|(name, _)| *name == T::NAME) {
            Some(at) => at,
            None => {
                self.0.push((T::NAME, Box::new(T::default())));
                self.0.len() - 1
            }
        };
        self.0[at].1.as_any_mut().downcast_mut().expect("a section's name belongs to one type")
    }

    /// Adds `entry`'s section from the file's table of its name (its defaults when the file has none); a
    /// section already there is kept.
    pub fn add(&mut self, entry: &SectionEntry, table: Option<toml::Value>) -> Result<(), ConfigError> {
        if let Some(table) = table {
            if !self.has(entry) {
                let section =
                    (entry.parse)(table).map_err(|error| ConfigError::new(format!("[{}]", entry.name), error))?;
                self.0.push((entry.name, section));
            }
        }
        self.add_default(entry);
        Ok(())
    }

    /// Adds `entry`'s section with its defaults, unless it is there already.
    pub fn add_default(&mut self, entry: &SectionEntry) {
        if !self.has(entry) {
            self.0.push((entry.name, (entry.default)()));
        }
    }

    fn has(&self, entry: &SectionEntry) -> bool {
        self.0.iter().any(|(name, _)| *name == entry.name)
    }

    pub(crate) fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        self.0.iter_mut().try_for_each(|(_, section)| section.apply_env(env))
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.0.iter().try_for_each(|(_, section)| section.validate())
    }

    pub(crate) fn pending(&self) -> Vec<PendingSecret> {
        self.0.iter().flat_map(|(_, section)| section.pending()).collect()
    }

    pub(crate) fn fill(&mut self, setting: &str, value: Secret) {
        for (_, section) in &mut self.0 {
            section.fill(setting, value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize)]
    struct Inner {
        depth: u32,
    }

    #[derive(Debug, Serialize)]
    struct Example {
        name: String,
        size: usize,
        token: Option<Secret>,
        hosts: Vec<String>,
        inner: Inner,
    }

    impl Default for Example {
        fn default() -> Self {
            Self { name: "flowhost".into(), size: 4, token: None, hosts: Vec::new(), inner: Inner::default() }
        }
    }

    static EXAMPLE: &[Setting<Example>] = settings!(Example, "example.", [
        { "EX_NAME", name, "a name", check: not_empty() },
        { "EX_SIZE", size, "a size", check: between(1, 1024) },
        { "EX_TOKEN", token, "a token", default: "unset (open)" },
        { "EX_HOSTS", hosts, "hosts" },
        { "EX_DEPTH", inner.depth, "a nested depth", check: at_least(2), default: "`2`" },
    ]);

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn one_declaration_loads_checks_and_documents() {
        let mut example = Example::default();
        apply_env(
            &mut example,
            EXAMPLE,
            &env(&[("EX_SIZE", " 12 "), ("EX_TOKEN", " s3cret"), ("EX_HOSTS", "a, b,,"), ("EX_DEPTH", "3")]),
        )
        .unwrap();
        assert_eq!((example.size, example.hosts.join("|"), example.inner.depth), (12, "a|b".to_owned(), 3));
        assert_eq!(example.token.as_ref().unwrap().expose(), " s3cret", "a secret is taken as given");
        check(&example, EXAMPLE).unwrap();

        let error = apply_env(&mut example, EXAMPLE, &env(&[("EX_SIZE", "many")])).unwrap_err();
        assert_eq!(error.setting, "EX_SIZE");
        assert!(error.message.starts_with("\"many\": "), "{error}");
        example.size = 2048;
        let error = check(&example, EXAMPLE).unwrap_err();
        assert_eq!((error.setting.as_str(), error.message.contains("between 1 and 1024")), ("EX_SIZE", true));
        // An empty value is no value.
        apply_env(&mut example, EXAMPLE, &env(&[("EX_NAME", "  ")])).unwrap();
        assert_eq!(example.name, "flowhost");

        assert_eq!(
            markdown_rows(EXAMPLE),
            "| `example.name` | `EX_NAME` | `flowhost` | not empty | a name |\n\
             | `example.size` | `EX_SIZE` | `4` | 1 to 1024 | a size |\n\
             | `example.token` | `EX_TOKEN` | unset (open) |  | a token |\n\
             | `example.hosts` | `EX_HOSTS` | empty |  | hosts |\n\
             | `example.inner.depth` | `EX_DEPTH` | `2` | at least 2 | a nested depth |\n"
        );
    }
}
