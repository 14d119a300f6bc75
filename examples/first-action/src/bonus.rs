//! The welcome bonus itself: plain types and functions, with no call into the host, so they compile for the
//! native target and `cargo test` checks them without building a component.

use flowhost_sdk_guest::Error;
use serde::{Deserialize, Serialize};

/// The input of `welcome_bonus`, which is its rendered configuration (`config_schema` in `lib.rs` describes
/// exactly this): fields of the deposit event, filled in by placeholders, and the offer's limits. A field the
/// schema does not know is refused.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Who deposited (echoed in the output so the next node can address the player).
    pub player_id: String,
    /// The amount deposited, in `currency`.
    pub deposit: f64,
    /// ISO 4217 code of the deposit, e.g. `EUR` (case does not matter).
    pub currency: String,
    /// The offer; every field has a default, so the whole object may be left out.
    #[serde(default)]
    pub limits: Limits,
}

/// The offer's limits: what a flow author configures on the node. The manifest's `config_schema` describes this
/// object; a field it does not know is refused, so a misspelt limit never silently falls back to its default.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Bonus as a percentage of the deposit (0 to 500).
    pub match_percent: f64,
    /// The largest bonus, in the deposit's currency.
    pub max_bonus: f64,
    /// Deposits below this get no bonus (and a message saying how much would).
    pub min_deposit: f64,
    /// Currencies the offer runs in; a deposit in any other currency skips the node.
    pub currencies: Vec<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            match_percent: 100.0,
            max_bonus: 100.0,
            min_deposit: 10.0,
            currencies: vec!["EUR".into(), "USD".into(), "GBP".into()],
        }
    }
}

/// The output of `welcome_bonus`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bonus {
    /// The request's player.
    pub player_id: String,
    /// The deposit, as given.
    pub deposit: f64,
    /// The deposit's currency, upper case.
    pub currency: String,
    /// The bonus in `currency`, rounded to cents; 0 when the deposit is below the minimum.
    pub bonus: f64,
    /// A message for the player, e.g. for a push notification.
    pub message: String,
}

impl Bonus {
    /// The line the action writes into the host's log: amounts only, no player id (logs are not the place for
    /// personal data).
    pub fn log_line(&self) -> String {
        format!(
            "welcome bonus {:.2} {} for a deposit of {:.2} {}",
            self.bonus, self.currency, self.deposit, self.currency
        )
    }
}

/// Decides the welcome bonus of `request`.
///
/// - Input that cannot be right (an empty player id, a deposit that is not a positive amount, a malformed
///   currency code, limits out of range) is a **permanent** error: retrying the same input cannot help, so the run
///   goes to the dead-letter queue where an operator sees it.
/// - A well-formed currency the offer does not run in is **skip-forward**: nothing is wrong, this node just does
///   not apply, and the flow continues with the next node.
/// - Everything else succeeds, including a deposit below the minimum (a zero bonus and a message saying how much
///   to deposit).
pub fn welcome_bonus(request: Request) -> Result<Bonus, Error> {
    let Request { player_id, deposit, currency, limits } = request;
    if player_id.trim().is_empty() {
        return Err(Error::permanent("player_id must not be empty"));
    }
    if !deposit.is_finite() || deposit <= 0.0 {
        return Err(Error::permanent(format!("deposit must be a positive amount, got {deposit}")));
    }
    let currency = currency_code(&currency)
        .ok_or_else(|| Error::permanent(format!("currency must be a three-letter ISO 4217 code, got {currency:?}")))?;
    check_limits(&limits)?;
    if !limits.currencies.iter().any(|offered| offered.eq_ignore_ascii_case(&currency)) {
        return Err(Error::skip_forward(format!(
            "no welcome bonus in {currency} (offered in {})",
            limits.currencies.join(", ")
        )));
    }

    if deposit < limits.min_deposit {
        let message = format!("Deposit at least {:.2} {currency} to get your welcome bonus.", limits.min_deposit);
        return Ok(Bonus { player_id, deposit, currency, bonus: 0.0, message });
    }
    let bonus = cents(deposit * limits.match_percent / 100.0).min(limits.max_bonus);
    let message =
        format!("Welcome! We matched your deposit of {deposit:.2} {currency} with a {bonus:.2} {currency} bonus.");
    Ok(Bonus { player_id, deposit, currency, bonus, message })
}

/// `code` upper-cased if it is three ASCII letters.
fn currency_code(code: &str) -> Option<String> {
    let code = code.trim();
    (code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic())).then(|| code.to_ascii_uppercase())
}

fn check_limits(limits: &Limits) -> Result<(), Error> {
    let Limits { match_percent, max_bonus, min_deposit, currencies } = limits;
    if !(0.0..=500.0).contains(match_percent) {
        return Err(Error::permanent(format!("limits.match_percent must be between 0 and 500, got {match_percent}")));
    }
    if !max_bonus.is_finite() || *max_bonus < 0.0 {
        return Err(Error::permanent(format!("limits.max_bonus must not be negative, got {max_bonus}")));
    }
    if !min_deposit.is_finite() || *min_deposit < 0.0 {
        return Err(Error::permanent(format!("limits.min_deposit must not be negative, got {min_deposit}")));
    }
    if let Some(bad) = currencies.iter().find(|code| currency_code(code).is_none()) {
        return Err(Error::permanent(format!("limits.currencies: {bad:?} is not a three-letter ISO 4217 code")));
    }
    Ok(())
}

/// Rounds an amount to cents.
fn cents(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_sdk_guest::Outcome;
    use serde_json::json;

    fn decide(input: serde_json::Value) -> Result<Bonus, Error> {
        welcome_bonus(serde_json::from_value(input).expect("a well-formed request"))
    }

    #[test]
    fn matches_the_deposit_up_to_the_cap() {
        // Defaults: 100 % match, capped at 100.
        let bonus = decide(json!({"player_id": "p-1001", "deposit": 120.0, "currency": "EUR"})).unwrap();
        assert_eq!(
            bonus,
            Bonus {
                player_id: "p-1001".into(),
                deposit: 120.0,
                currency: "EUR".into(),
                bonus: 100.0,
                message: "Welcome! We matched your deposit of 120.00 EUR with a 100.00 EUR bonus.".into(),
            }
        );
        assert_eq!(bonus.log_line(), "welcome bonus 100.00 EUR for a deposit of 120.00 EUR");

        let limits = json!({"match_percent": 50, "max_bonus": 200});
        let bonus = decide(json!({"player_id": "p-1001", "deposit": 120.0, "currency": "eur", "limits": limits}));
        assert_eq!(bonus.map(|b| (b.bonus, b.currency)), Ok((60.0, "EUR".to_owned())));
    }

    #[test]
    fn rounds_to_cents() {
        let limits = json!({"match_percent": 33});
        let bonus = decide(json!({"player_id": "p", "deposit": 10.01, "currency": "USD", "limits": limits})).unwrap();
        assert_eq!(bonus.bonus, 3.3);
    }

    #[test]
    fn a_deposit_below_the_minimum_gets_no_bonus_and_a_hint() {
        let bonus = decide(json!({"player_id": "p-1001", "deposit": 5.0, "currency": "GBP"})).unwrap();
        assert_eq!(bonus.bonus, 0.0);
        assert_eq!(bonus.message, "Deposit at least 10.00 GBP to get your welcome bonus.");
    }

    #[test]
    fn a_currency_the_offer_does_not_run_in_skips_the_node() {
        let error = decide(json!({"player_id": "p-1001", "deposit": 120.0, "currency": "JPY"})).unwrap_err();
        assert_eq!(error, Error::skip_forward("no welcome bonus in JPY (offered in EUR, USD, GBP)"));

        let limits = json!({"currencies": ["SEK"]});
        let bonus = decide(json!({"player_id": "p", "deposit": 120.0, "currency": "SEK", "limits": limits}));
        assert!(bonus.is_ok(), "{bonus:?}");
    }

    #[test]
    fn input_that_cannot_be_right_is_permanent() {
        let cases = [
            (json!({"player_id": " ", "deposit": 120.0, "currency": "EUR"}), "player_id must not be empty"),
            (json!({"player_id": "p", "deposit": 0.0, "currency": "EUR"}), "deposit must be a positive amount, got 0"),
            (json!({"player_id": "p", "deposit": -5, "currency": "EUR"}), "deposit must be a positive amount, got -5"),
            (
                json!({"player_id": "p", "deposit": 1.0, "currency": "euro"}),
                "currency must be a three-letter ISO 4217 code, got \"euro\"",
            ),
            (
                json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "limits": {"match_percent": 900}}),
                "limits.match_percent must be between 0 and 500, got 900",
            ),
            (
                json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "limits": {"max_bonus": -1}}),
                "limits.max_bonus must not be negative, got -1",
            ),
            (
                json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "limits": {"min_deposit": -1}}),
                "limits.min_deposit must not be negative, got -1",
            ),
            (
                json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "limits": {"currencies": ["EUR", "€"]}}),
                "limits.currencies: \"€\" is not a three-letter ISO 4217 code",
            ),
        ];
        for (input, message) in cases {
            let error = decide(input.clone()).unwrap_err();
            assert_eq!((error.outcome, error.message.as_str()), (Outcome::Permanent, message), "{input}");
        }
    }

    #[test]
    fn a_misspelt_limit_is_refused() {
        let input = json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "limits": {"max_bonnus": 5}});
        let error = serde_json::from_value::<Request>(input).unwrap_err();
        assert!(error.to_string().starts_with("unknown field `max_bonnus`"), "{error}");
        // The input is the configuration its schema describes: a field beside them is refused too.
        let input = json!({"player_id": "p", "deposit": 1.0, "currency": "EUR", "amount": 1.0});
        let error = serde_json::from_value::<Request>(input).unwrap_err();
        assert!(error.to_string().starts_with("unknown field `amount`"), "{error}");
    }
}
