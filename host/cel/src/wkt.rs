//! The protobuf well-known types CEL names in expressions (`google.protobuf.Int64Value{value: 1}`,
//! `google.protobuf.Timestamp`, `google.protobuf.Value{...}`), without any protobuf runtime: each is built
//! straight into the CEL value it stands for (a wrapper into its scalar, `Timestamp` and `Duration` into theirs,
//! `Value`, `Struct` and `ListValue` into the JSON value, map and list), so no message value ever reaches the
//! evaluator. Flowhost's expressions read JSON events and declare no messages of their own; this is all the
//! protobuf CEL needs here. The registry also names the network extension's opaque types (`net.IP`, `net.CIDR`),
//! which are values of their own and never built from fields.

use std::any::Any;
use std::sync::Arc;

use cel_core::types::{CelType, ResolvedProtoType};
use cel_core::{
    proto_message_to_cel_type, EvalError, MapKey, MessageValue, ProtoRegistry, ProtoTypeResolver, StructFieldValue,
    Value,
};

const WRAPPERS: &[&str] = &[
    "google.protobuf.BoolValue",
    "google.protobuf.BytesValue",
    "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue",
    "google.protobuf.Int32Value",
    "google.protobuf.Int64Value",
    "google.protobuf.StringValue",
    "google.protobuf.UInt32Value",
    "google.protobuf.UInt64Value",
];

const OTHERS: &[&str] = &[
    "google.protobuf.Duration",
    "google.protobuf.ListValue",
    "google.protobuf.Struct",
    "google.protobuf.Timestamp",
    "google.protobuf.Value",
];

const NULL_VALUE: &str = "google.protobuf.NullValue";

/// The well-known types, as a CEL type registry.
#[derive(Debug, Default)]
pub struct WellKnownTypes;

fn known(name: &str) -> bool {
    WRAPPERS.contains(&name) || OTHERS.contains(&name)
}

/// `net.IP` and `net.CIDR` are names of types here too (`type(ip('::1')) == net.IP`), though no message.
fn is_network_type(name: &str) -> bool {
    crate::net::TYPE_NAMES.contains(&name)
}

/// `name` resolved in `container` (protobuf scoping: the innermost enclosing package first), if well-known.
fn resolve(name: &str, container: &str, accept: impl Fn(&str) -> bool) -> Option<String> {
    if let Some(absolute) = name.strip_prefix('.') {
        return accept(absolute).then(|| absolute.to_owned());
    }
    let mut scope = container;
    loop {
        let candidate = if scope.is_empty() { name.to_owned() } else { format!("{scope}.{name}") };
        if accept(&candidate) {
            return Some(candidate);
        }
        if scope.is_empty() {
            return None;
        }
        scope = scope.rfind('.').map_or("", |at| &scope[..at]);
    }
}

impl ProtoTypeResolver for WellKnownTypes {
    fn get_field_type(&self, message: &str, field: &str) -> Option<CelType> {
        let wrapped = |message: &str| match proto_message_to_cel_type(message) {
            CelType::Wrapper(inner) => Some((*inner).clone()),
            _ => None,
        };
        match (message, field) {
            (wrapper, "value") if WRAPPERS.contains(&wrapper) => wrapped(wrapper),
            ("google.protobuf.Timestamp" | "google.protobuf.Duration", "seconds" | "nanos") => Some(CelType::Int),
            ("google.protobuf.Value", "null_value") => Some(CelType::Null),
            ("google.protobuf.Value", "number_value") => Some(CelType::Double),
            ("google.protobuf.Value", "string_value") => Some(CelType::String),
            ("google.protobuf.Value", "bool_value") => Some(CelType::Bool),
            ("google.protobuf.Value", "struct_value") | ("google.protobuf.Struct", "fields") => {
                Some(CelType::map(CelType::String, CelType::Dyn))
            }
            ("google.protobuf.Value", "list_value") | ("google.protobuf.ListValue", "values") => {
                Some(CelType::list(CelType::Dyn))
            }
            _ => None,
        }
    }

    fn has_message(&self, message: &str) -> bool {
        known(message)
    }

    fn is_extension(&self, _message: &str, _ext_name: &str) -> bool {
        false
    }

    fn get_enum_value(&self, enum_name: &str, value_name: &str) -> Option<i32> {
        (enum_name == NULL_VALUE && value_name == "NULL_VALUE").then_some(0)
    }

    fn resolve_qualified(&self, parts: &[&str], container: &str) -> Option<ResolvedProtoType> {
        let name = parts.join(".");
        if let Some(network) = resolve(&name, container, is_network_type) {
            let cel_type = CelType::Type(Arc::new(crate::net::cel_type(&network)));
            return Some(ResolvedProtoType::Message { name: network, cel_type });
        }
        if let Some(message) = resolve(&name, container, known) {
            let cel_type = CelType::Type(Arc::new(proto_message_to_cel_type(&message)));
            return Some(ResolvedProtoType::Message { name: message, cel_type });
        }
        let (enum_part, value) = name.rsplit_once('.')?;
        let enum_name = resolve(enum_part, container, |candidate| candidate == NULL_VALUE)?;
        (value == "NULL_VALUE").then_some(ResolvedProtoType::EnumValue { enum_name, value: 0 })
    }

    fn resolve_message_name(&self, name: &str, container: &str) -> Option<String> {
        resolve(name, container, |candidate| known(candidate) || is_network_type(candidate))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn field<'a>(fields: &'a [StructFieldValue], name: &str) -> Option<&'a Value> {
    fields.iter().find(|field| field.name == name).map(|field| &field.value)
}

fn unknown_field(type_name: &str, fields: &[StructFieldValue], allowed: &[&str]) -> Option<Value> {
    let unknown = fields.iter().find(|field| !allowed.contains(&field.name.as_str()))?;
    Some(Value::error(EvalError::invalid_argument(format!("{type_name} has no field {:?}", unknown.name))))
}

fn int_in(value: Option<&Value>, range: std::ops::RangeInclusive<i64>, type_name: &str) -> Result<i64, Value> {
    match value {
        None => Ok(0),
        Some(Value::Int(i)) if range.contains(i) => Ok(*i),
        Some(Value::Int(_)) => {
            Err(Value::error(EvalError::invalid_argument(format!("{type_name} value out of range"))))
        }
        Some(other) => Err(Value::error(EvalError::type_mismatch("int", &format!("{other:?}")))),
    }
}

impl ProtoRegistry for WellKnownTypes {
    fn construct_message(&self, type_name: &str, fields: &[StructFieldValue], _strong_enums: bool) -> Value {
        let allowed: &[&str] = match type_name {
            "google.protobuf.Timestamp" | "google.protobuf.Duration" => &["seconds", "nanos"],
            "google.protobuf.Value" => {
                &["null_value", "number_value", "string_value", "bool_value", "struct_value", "list_value"]
            }
            "google.protobuf.Struct" => &["fields"],
            "google.protobuf.ListValue" => &["values"],
            wrapper if WRAPPERS.contains(&wrapper) => &["value"],
            other => {
                return Value::error(EvalError::invalid_argument(format!(
                    "unknown message type {other:?}: only protobuf's well-known types can be built"
                )))
            }
        };
        if let Some(error) = unknown_field(type_name, fields, allowed) {
            return error;
        }
        let value = field(fields, "value");
        match type_name {
            "google.protobuf.BoolValue" => value.cloned().unwrap_or(Value::Bool(false)),
            "google.protobuf.BytesValue" => value.cloned().unwrap_or_else(|| Value::Bytes(Arc::from(&[][..]))),
            "google.protobuf.StringValue" => value.cloned().unwrap_or_else(|| Value::String(Arc::from(""))),
            "google.protobuf.DoubleValue" => value.cloned().unwrap_or(Value::Double(0.0)),
            "google.protobuf.FloatValue" => match value {
                // A float keeps single precision.
                Some(Value::Double(d)) => Value::Double(f64::from(*d as f32)),
                Some(other) => other.clone(),
                None => Value::Double(0.0),
            },
            "google.protobuf.Int64Value" => value.cloned().unwrap_or(Value::Int(0)),
            "google.protobuf.UInt64Value" => value.cloned().unwrap_or(Value::UInt(0)),
            "google.protobuf.Int32Value" => match int_in(value, i32::MIN.into()..=i32::MAX.into(), type_name) {
                Ok(i) => Value::Int(i),
                Err(error) => error,
            },
            "google.protobuf.UInt32Value" => match value {
                None => Value::UInt(0),
                Some(Value::UInt(u)) if *u <= u64::from(u32::MAX) => Value::UInt(*u),
                Some(Value::UInt(_)) => Value::error(EvalError::invalid_argument("UInt32Value value out of range")),
                Some(other) => other.clone(),
            },
            "google.protobuf.Timestamp" | "google.protobuf.Duration" => {
                let seconds = match int_in(field(fields, "seconds"), i64::MIN..=i64::MAX, type_name) {
                    Ok(seconds) => seconds,
                    Err(error) => return error,
                };
                let nanos = match int_in(field(fields, "nanos"), -999_999_999..=999_999_999, type_name) {
                    Ok(nanos) => nanos as i32,
                    Err(error) => return error,
                };
                if type_name == "google.protobuf.Timestamp" {
                    Value::Timestamp(cel_core::Timestamp::new(seconds, nanos))
                } else {
                    Value::Duration(cel_core::Duration::new(seconds, nanos))
                }
            }
            "google.protobuf.Value" => match fields.first() {
                None => Value::Null,
                Some(set) if set.name == "null_value" => Value::Null,
                // A `Value` is the JSON value it holds: its one set field's.
                Some(set) => set.value.clone(),
            },
            "google.protobuf.Struct" => {
                field(fields, "fields").cloned().unwrap_or_else(|| Value::map(Vec::<(MapKey, Value)>::new()))
            }
            _ => field(fields, "values").cloned().unwrap_or_else(|| Value::from(Vec::<Value>::new())),
        }
    }

    fn message_field_access(&self, _msg: &dyn MessageValue, field: &str, _optional: bool, _strong: bool) -> Value {
        Value::error(EvalError::invalid_argument(format!("no message fields here (field {field:?})")))
    }

    fn message_has_field(&self, _msg: &dyn MessageValue, field: &str) -> Value {
        Value::error(EvalError::invalid_argument(format!("no message fields here (field {field:?})")))
    }

    fn get_extension_value(&self, _: &dyn MessageValue, _: &str, _: bool, _: bool) -> Option<Value> {
        None
    }

    fn has_extension(&self, _: &dyn MessageValue, _: &str) -> Option<bool> {
        None
    }
}
