//! CEL's network extension (cel-spec's `network_ext`, cel-go's `ext.Network()`), for rules over client
//! addresses: two opaque types, `net.IP` and `net.CIDR`, and the functions over them.
//!
//! - `ip(string) -> net.IP`, `isIP(string) -> bool`, `ip.isCanonical(string) -> bool` (RFC 5952's form);
//! - `cidr(string) -> net.CIDR`, `isCIDR(string) -> bool`;
//! - `ip.family()`, `isUnspecified()`, `isLoopback()`, `isGlobalUnicast()`, `isLinkLocalMulticast()`,
//!   `isLinkLocalUnicast()`;
//! - `cidr.containsIP(ip | string)`, `containsCIDR(cidr | string)`, `ip()`, `isMask()`, `masked()`,
//!   `prefixLength()`;
//! - `string(ip)`, `string(cidr)`, `==` and `type(...) == net.IP`.
//!
//! Parsing is strict, as the spec's tests have it: no zones (`fe80::1%en0`), no IPv4-mapped address written with
//! a dotted quad (`::ffff:192.168.0.1`, ambiguous between the two families), no leading zeros in IPv4 octets or
//! prefix lengths. An IPv4-mapped address written in hex (`::ffff:c0a8:1`) is the IPv4 address it maps, so it
//! equals `ip('192.168.0.1')`; in a CIDR it is refused in either form, where the prefix length would change
//! meaning. A CIDR keeps its host bits (`cidr('10.0.0.1/8').ip()` is `10.0.0.1`); `masked()` drops them.
//!
//! The values are [`MessageValue`]s named `net.IP` and `net.CIDR` (cel-core's only extension point for values);
//! the checker sees them as abstract types of those names, which [`crate::wkt`]'s registry also resolves, so
//! `net.IP` names the type in an expression.

use std::any::Any;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use cel_core::types::{CelType, FunctionDecl, OverloadDecl};
use cel_core::{Env, EvalError, MapActivation, MessageValue, Program, Value};

/// The type names an expression writes, and their values report.
pub const IP_TYPE: &str = "net.IP";
pub const CIDR_TYPE: &str = "net.CIDR";
/// Both, for the type registry.
pub const TYPE_NAMES: [&str; 2] = [IP_TYPE, CIDR_TYPE];

/// The checker's view of a network type.
pub fn cel_type(name: &str) -> CelType {
    CelType::abstract_type(name, &[])
}

/// A `net.IP`: IPv4 or IPv6, never IPv4-mapped (those are read as their IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ip(IpAddr);

/// A `net.CIDR`: an address (host bits kept) and a prefix length no longer than the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    addr: IpAddr,
    bits: u8,
}

macro_rules! message_value {
    ($type:ty, $name:expr) => {
        impl MessageValue for $type {
            fn type_name(&self) -> &str {
                $name
            }

            fn eq_message(&self, other: &dyn MessageValue) -> bool {
                other.as_any().downcast_ref::<$type>() == Some(self)
            }

            fn as_any(&self) -> &dyn Any {
                self
            }

            fn clone_boxed(&self) -> Box<dyn MessageValue> {
                Box::new(*self)
            }
        }
    };
}

message_value!(Ip, IP_TYPE);
message_value!(Cidr, CIDR_TYPE);

fn error(message: impl Into<String>) -> Value {
    Value::error(EvalError::invalid_argument(message.into()))
}

fn mismatch(expected: &str, found: &Value) -> Value {
    Value::error(EvalError::type_mismatch(expected, &found.type_value().name))
}

/// Parses an IP address as `ip()` does; the error is the message the spec's tests expect.
fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    if raw.contains('%') {
        return Err("IP Address with zone value is not allowed".to_owned());
    }
    let addr: IpAddr =
        raw.parse().map_err(|_| format!("IP Address '{raw}' parse error during conversion from string"))?;
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(_) if raw.contains('.') => Err("IPv4-mapped IPv6 address is not allowed".to_owned()),
            Some(v4) => Ok(IpAddr::V4(v4)),
            None => Ok(addr),
        },
        IpAddr::V4(_) => Ok(addr),
    }
}

/// Parses `address/length` as `cidr()` does.
fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let refused = || format!("CIDR '{raw}' network address parse error during conversion from string");
    let (address, length) = raw.rsplit_once('/').ok_or_else(refused)?;
    if address.contains('%') {
        return Err("CIDR with zone value is not allowed".to_owned());
    }
    let addr: IpAddr = address.parse().map_err(|_| refused())?;
    if let IpAddr::V6(v6) = addr {
        if v6.to_ipv4_mapped().is_some() {
            return Err("IPv4-mapped IPv6 address is not allowed".to_owned());
        }
    }
    let canonical_digits =
        !length.is_empty() && length.bytes().all(|b| b.is_ascii_digit()) && (length == "0" || !length.starts_with('0'));
    let bits: u8 = length.parse().ok().filter(|_| canonical_digits).ok_or_else(refused)?;
    if bits > width(addr) {
        return Err(refused());
    }
    Ok(Cidr { addr, bits })
}

fn width(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

fn to_bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_bits(family: IpAddr, bits: u128) -> IpAddr {
    match family {
        // The value came from an IPv4 address's 32 bits, masked: it fits.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
    }
}

impl Cidr {
    fn mask(&self) -> u128 {
        let host = u32::from(width(self.addr) - self.bits);
        let all = if self.addr.is_ipv4() { u128::from(u32::MAX) } else { u128::MAX };
        all.checked_shl(host).map_or(0, |shifted| shifted & all)
    }

    fn masked(&self) -> Cidr {
        Cidr { addr: from_bits(self.addr, to_bits(self.addr) & self.mask()), bits: self.bits }
    }

    fn contains_ip(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && to_bits(ip) & self.mask() == to_bits(self.addr) & self.mask()
    }

    fn contains_cidr(&self, other: &Cidr) -> bool {
        self.bits <= other.bits && self.contains_ip(other.addr)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

fn ip_value(addr: IpAddr) -> Value {
    Value::Message(Box::new(Ip(addr)))
}

fn cidr_value(cidr: Cidr) -> Value {
    Value::Message(Box::new(cidr))
}

fn as_ip(value: &Value) -> Option<IpAddr> {
    match value {
        Value::Message(m) => m.as_any().downcast_ref::<Ip>().map(|ip| ip.0),
        _ => None,
    }
}

fn as_cidr(value: &Value) -> Option<Cidr> {
    match value {
        Value::Message(m) => m.as_any().downcast_ref::<Cidr>().copied(),
        _ => None,
    }
}

/// An IP argument: a `net.IP`, or a string parsed as one.
fn ip_arg(value: &Value) -> Result<IpAddr, Value> {
    match value {
        Value::String(s) => parse_ip(s).map_err(error),
        other => as_ip(other).ok_or_else(|| mismatch(IP_TYPE, other)),
    }
}

/// A CIDR argument: a `net.CIDR`, or a string parsed as one.
fn cidr_arg(value: &Value) -> Result<Cidr, Value> {
    match value {
        Value::String(s) => parse_cidr(s).map_err(error),
        other => as_cidr(other).ok_or_else(|| mismatch(CIDR_TYPE, other)),
    }
}

fn string_arg(value: &Value) -> Result<&str, Value> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(mismatch("string", other)),
    }
}

fn unary(args: &[Value], body: impl FnOnce(&Value) -> Result<Value, Value>) -> Value {
    match args {
        [only] => body(only).unwrap_or_else(|e| e),
        _ => error("one argument expected"),
    }
}

fn binary(args: &[Value], body: impl FnOnce(&Value, &Value) -> Result<Value, Value>) -> Value {
    match args {
        [a, b] => body(a, b).unwrap_or_else(|e| e),
        _ => error("two arguments expected"),
    }
}

/// `string(x)` for every argument that is not a network value: cel-core's own conversion. An implemented
/// `string` overload takes the name from the evaluator's built-in conversion (it only falls back to it when no
/// overload is implemented), so the network overload hands everything else back to it, evaluated by cel-core.
fn standard_string(value: &Value) -> Value {
    static PROGRAM: OnceLock<Option<Program>> = OnceLock::new();
    let program = PROGRAM.get_or_init(|| {
        let env = Env::with_standard_library().with_variable("x", CelType::Dyn);
        env.parse_only("string(x)").ok().and_then(|ast| env.program(&ast).ok())
    });
    let Some(program) = program else {
        return error("string(): the standard conversion is unavailable");
    };
    let mut activation = MapActivation::new();
    activation.insert("x", value.clone());
    program.eval(&activation)
}

fn to_string(value: &Value) -> Value {
    if let Some(addr) = as_ip(value) {
        return Value::String(Arc::from(addr.to_string()));
    }
    if let Some(cidr) = as_cidr(value) {
        return Value::String(Arc::from(cidr.to_string()));
    }
    standard_string(value)
}

/// RFC 5952's text of `addr` (lower case, the longest run of zero groups compressed), as Rust's `Display`
/// writes it; `ip.isCanonical` compares against it.
fn is_canonical(raw: &str) -> Result<bool, String> {
    parse_ip(raw).map(|addr| addr.to_string() == raw)
}

fn is_global_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified() || v4.is_broadcast() || v4.is_loopback() || v4.is_multicast() || v4.is_link_local())
        }
        IpAddr::V6(v6) => !(v6.is_unspecified() || v6.is_loopback() || v6.is_multicast() || v6.is_unicast_link_local()),
    }
}

fn is_link_local_multicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn is_link_local_unicast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    }
}

fn ip_predicate(name: &str, id: &str, test: fn(IpAddr) -> bool) -> FunctionDecl {
    FunctionDecl::new(name).with_overload(
        OverloadDecl::method(id, vec![cel_type(IP_TYPE)], CelType::Bool)
            .with_impl(move |args| unary(args, |ip| Ok(Value::Bool(test(ip_arg_strict(ip)?))))),
    )
}

/// A receiver that must be a `net.IP` (not a string).
fn ip_arg_strict(value: &Value) -> Result<IpAddr, Value> {
    as_ip(value).ok_or_else(|| mismatch(IP_TYPE, value))
}

/// A receiver that must be a `net.CIDR` (not a string).
fn cidr_arg_strict(value: &Value) -> Result<Cidr, Value> {
    as_cidr(value).ok_or_else(|| mismatch(CIDR_TYPE, value))
}

fn string_predicate(name: &str, id: &str, test: fn(&str) -> Result<bool, String>) -> FunctionDecl {
    FunctionDecl::new(name).with_overload(
        OverloadDecl::function(id, vec![CelType::String], CelType::Bool)
            .with_impl(move |args| unary(args, |s| test(string_arg(s)?).map(Value::Bool).map_err(error))),
    )
}

/// The declarations (with implementations) of the functions above.
pub fn extension() -> Vec<FunctionDecl> {
    let ip = || cel_type(IP_TYPE);
    let cidr = || cel_type(CIDR_TYPE);
    let cidr_method = |name: &str, id: &str, result: CelType, body: fn(Cidr) -> Value| {
        FunctionDecl::new(name).with_overload(
            OverloadDecl::method(id, vec![cidr()], result)
                .with_impl(move |args| unary(args, |c| Ok(body(cidr_arg_strict(c)?)))),
        )
    };
    // One implementation per function, registered for each of its overloads: the evaluator tries overloads in
    // turn and reports the first one's error, so each must give the real reason for any argument.
    let contains_ip =
        |args: &[Value]| binary(args, |c, ip| Ok(Value::Bool(cidr_arg_strict(c)?.contains_ip(ip_arg(ip)?))));
    let contains_cidr =
        |args: &[Value]| binary(args, |c, other| Ok(Value::Bool(cidr_arg_strict(c)?.contains_cidr(&cidr_arg(other)?))));
    vec![
        FunctionDecl::new("ip")
            .with_overload(
                OverloadDecl::function("string_to_ip", vec![CelType::String], ip())
                    .with_impl(|args| unary(args, |s| parse_ip(string_arg(s)?).map(ip_value).map_err(error))),
            )
            .with_overload(
                OverloadDecl::method("cidr_ip", vec![cidr()], ip())
                    .with_impl(|args| unary(args, |c| Ok(ip_value(cidr_arg_strict(c)?.addr)))),
            ),
        FunctionDecl::new("cidr").with_overload(
            OverloadDecl::function("string_to_cidr", vec![CelType::String], cidr())
                .with_impl(|args| unary(args, |s| parse_cidr(string_arg(s)?).map(cidr_value).map_err(error))),
        ),
        string_predicate("isIP", "is_ip", |s| Ok(parse_ip(s).is_ok())),
        string_predicate("isCIDR", "is_cidr", |s| Ok(parse_cidr(s).is_ok())),
        string_predicate("ip.isCanonical", "ip_is_canonical", is_canonical),
        FunctionDecl::new("string")
            .with_overload(
                OverloadDecl::function("ip_to_string", vec![ip()], CelType::String)
                    .with_impl(|args| unary(args, |v| Ok(to_string(v)))),
            )
            .with_overload(
                OverloadDecl::function("cidr_to_string", vec![cidr()], CelType::String)
                    .with_impl(|args| unary(args, |v| Ok(to_string(v)))),
            ),
        FunctionDecl::new("family").with_overload(
            OverloadDecl::method("ip_family", vec![ip()], CelType::Int)
                .with_impl(|args| unary(args, |v| Ok(Value::Int(if ip_arg_strict(v)?.is_ipv4() { 4 } else { 6 })))),
        ),
        ip_predicate("isUnspecified", "ip_is_unspecified", |a| a.is_unspecified()),
        ip_predicate("isLoopback", "ip_is_loopback", |a| a.is_loopback()),
        ip_predicate("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
        ip_predicate("isLinkLocalMulticast", "ip_is_link_local_multicast", is_link_local_multicast),
        ip_predicate("isLinkLocalUnicast", "ip_is_link_local_unicast", is_link_local_unicast),
        FunctionDecl::new("containsIP")
            .with_overload(
                OverloadDecl::method("cidr_contains_ip_ip", vec![cidr(), ip()], CelType::Bool).with_impl(contains_ip),
            )
            .with_overload(
                OverloadDecl::method("cidr_contains_ip_string", vec![cidr(), CelType::String], CelType::Bool)
                    .with_impl(contains_ip),
            ),
        FunctionDecl::new("containsCIDR")
            .with_overload(
                OverloadDecl::method("cidr_contains_cidr", vec![cidr(), cidr()], CelType::Bool)
                    .with_impl(contains_cidr),
            )
            .with_overload(
                OverloadDecl::method("cidr_contains_cidr_string", vec![cidr(), CelType::String], CelType::Bool)
                    .with_impl(contains_cidr),
            ),
        cidr_method("isMask", "cidr_is_mask", CelType::Bool, |c| Value::Bool(c.masked() == c)),
        cidr_method("masked", "cidr_masked", cidr(), |c| cidr_value(c.masked())),
        cidr_method("prefixLength", "cidr_prefix_length", CelType::Int, |c| Value::Int(i64::from(c.bits))),
    ]
}

#[cfg(test)]
mod tests {
    use cel_core::{MapActivation, Value};

    use crate::{compile, environment, parse, Runnable};

    fn eval(source: &str) -> Value {
        let env = environment();
        compile(&env, source).unwrap_or_else(|problem| panic!("{source}: {problem}"));
        let runnable = Runnable::new(&env, source).unwrap_or_else(|problem| panic!("{source}: {problem}"));
        runnable.program.eval(&MapActivation::new())
    }

    fn holds(source: &str) {
        assert_eq!(eval(source), Value::Bool(true), "{source}");
    }

    fn fails_with(source: &str, message: &str) {
        match eval(source) {
            Value::Error(error) => assert!(error.to_string().contains(message), "{source}: {error}"),
            other => panic!("{source}: {other:?}, expected an error containing {message:?}"),
        }
    }

    #[test]
    fn addresses_parse_strictly_and_print_canonically() {
        holds("string(ip('10.1.2.3')) == '10.1.2.3'");
        holds("string(ip('2001:DB8:0:0:0:0:0:1')) == '2001:db8::1'");
        holds("string(ip('::')) == '::' && string(ip('1::')) == '1::'");
        holds("isIP('192.0.2.1') && isIP('fe80::1') && !isIP('192.0.2') && !isIP('192.0.2.1.5') && !isIP('')");
        holds("!isIP('010.0.0.1') && !isIP('1.2.3.256') && !isIP('1::2::3') && !isIP(' 1.2.3.4')");
        holds("ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1') && !ip.isCanonical('2001:db8:0::1')");
        fails_with("ip('300.1.1.1')", "IP Address '300.1.1.1' parse error during conversion from string");
        fails_with("ip.isCanonical('x')", "IP Address 'x' parse error");
    }

    #[test]
    fn zones_and_dotted_ipv4_mapped_addresses_are_refused() {
        fails_with("ip('fe80::1%eth0')", "IP Address with zone value is not allowed");
        fails_with("ip('::ffff:10.0.0.1')", "IPv4-mapped IPv6 address is not allowed");
        fails_with("cidr('fe80::%eth0/64')", "CIDR with zone value is not allowed");
        fails_with("cidr('::ffff:10.0.0.0/104')", "IPv4-mapped IPv6 address is not allowed");
        fails_with("cidr('::ffff:a00:0/104')", "IPv4-mapped IPv6 address is not allowed");
        holds("!isIP('::ffff:10.0.0.1') && !isCIDR('fe80::%eth0/64')");
    }

    #[test]
    fn a_hex_ipv4_mapped_address_is_the_ipv4_address() {
        holds("ip('::ffff:a00:1') == ip('10.0.0.1') && ip('::ffff:a00:1').family() == 4");
        holds("string(ip('::ffff:7f00:1')) == '127.0.0.1' && ip('::ffff:7f00:1').isLoopback()");
        holds("ip('::a00:1') != ip('10.0.0.1')");
    }

    #[test]
    fn families_and_kinds() {
        holds("ip('10.0.0.1').family() == 4 && ip('::1').family() == 6");
        holds("ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && !ip('::1').isUnspecified()");
        holds("ip('127.8.9.10').isLoopback() && ip('::1').isLoopback() && !ip('::2').isLoopback()");
        holds("ip('10.0.0.1').isGlobalUnicast() && ip('2001:db8::1').isGlobalUnicast()");
        holds("!ip('255.255.255.255').isGlobalUnicast() && !ip('224.0.0.1').isGlobalUnicast()");
        holds(
            "!ip('169.254.1.1').isGlobalUnicast() && !ip('fe80::1').isGlobalUnicast() && !ip('::').isGlobalUnicast()",
        );
        holds("ip('224.0.0.251').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()");
        holds("ip('ff02::fb').isLinkLocalMulticast() && ip('ff12::1').isLinkLocalMulticast()");
        holds("!ip('ff05::1').isLinkLocalMulticast()");
        holds("ip('169.254.169.254').isLinkLocalUnicast() && ip('febf::1').isLinkLocalUnicast()");
        holds("!ip('fec0::1').isLinkLocalUnicast() && !ip('169.255.0.1').isLinkLocalUnicast()");
    }

    #[test]
    fn ranges_hold_their_host_bits_and_contain_by_family() {
        holds("string(cidr('10.1.2.3/8')) == '10.1.2.3/8' && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')");
        holds("cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && !cidr('10.1.2.3/8').isMask()");
        holds("cidr('10.0.0.0/8').isMask() && cidr('0.0.0.0/0').isMask() && cidr('::/0').masked() == cidr('::/0')");
        holds("cidr('2001:db8::1/32').masked() == cidr('2001:db8::/32') && cidr('::1/128').isMask()");
        holds("cidr('10.0.0.1/8') != cidr('10.0.0.0/8') && cidr('10.0.0.0/8') != cidr('10.0.0.0/9')");
        holds("cidr('10.0.0.0/8').prefixLength() == 8 && cidr('::/0').prefixLength() == 0");
        holds("cidr('10.0.0.0/8').containsIP(ip('10.255.0.1')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')");
        holds("cidr('0.0.0.0/0').containsIP('1.2.3.4') && !cidr('0.0.0.0/0').containsIP('::1')");
        holds("!cidr('::/0').containsIP('1.2.3.4') && cidr('::/0').containsIP('2001:db8::1')");
        holds("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.0.0.0/8').containsCIDR(cidr('10.0.0.0/8'))");
        holds("!cidr('10.0.0.0/16').containsCIDR('10.0.0.0/8') && !cidr('10.0.0.0/8').containsCIDR('::/128')");
        holds("cidr('192.168.0.0/24').containsCIDR('192.168.0.7/32') && !cidr('192.168.0.0/24').containsCIDR('192.168.1.0/24')");
        holds("isCIDR('10.0.0.1/8') && isCIDR('::/0') && !isCIDR('10.0.0.0') && !isCIDR('10.0.0.0/33')");
        holds("!isCIDR('::/129') && !isCIDR('10.0.0.0/08') && !isCIDR('10.0.0.0/+8') && !isCIDR('10.0.0.0/') && !isCIDR('/8')");
        fails_with("cidr('10.0.0.0/33')", "network address parse error during conversion from string");
        fails_with("cidr('10.0.0.0/8').containsIP('nope')", "IP Address 'nope' parse error");
        fails_with("cidr('10.0.0.0/8').containsCIDR('10.0.0.0')", "network address parse error");
    }

    #[test]
    fn the_types_have_names_and_compare_only_with_themselves() {
        holds("type(ip('::1')) == net.IP && type(cidr('::1/128')) == net.CIDR && type(ip('::1')) != net.CIDR");
        holds("ip('10.0.0.1') in [ip('10.0.0.2'), ip('10.0.0.1')]");
        holds("string(1) == '1' && string(b'x') == 'x' && string(2.5) == '2.5' && string('s') == 's'");
        assert!(matches!(eval("net.IP{}"), Value::Error(_)), "no construction");
    }

    #[test]
    fn the_checker_knows_the_signatures() {
        let env = environment();
        for wrong in ["isIP(cidr('10.0.0.0/8'))", "ip('::1').containsIP('::1')", "cidr('::/0').family()", "ip(1)"] {
            assert!(compile(&env, wrong).is_err(), "{wrong} should not type-check");
        }
        // Unchecked (a field read as it comes), a wrong receiver is an evaluation error, not a panic.
        let ast = parse(&env, "x.family()").unwrap();
        let mut activation = MapActivation::new();
        activation.insert("x", Value::from("10.0.0.1"));
        assert!(matches!(env.program(&ast).unwrap().eval(&activation), Value::Error(_)));
    }
}
