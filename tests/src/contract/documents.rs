//! The documents port contract: ids are separate from bodies, `insert` conflicts on an existing id, `replace`
//! refuses a missing id, lists and finds are sorted by id, `find`/`delete_where` compare one top-level field, and
//! JSON numbers come back as the kind they went in (integer or float). Queries filter on nested paths with
//! type-strict comparisons, sort with the id as tie-breaker and page with a total; versions make exactly one of
//! two concurrent compare-and-replaces win; unique and compound indexes; logical databases are separate. The
//! typed layer over the port (`flowhost_core::stored`) converts and fails the same way on every backend.

use std::sync::Arc;

use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, PortError, Query, VersionedWrite};
use flowhost_core::stored::{self, Collection, Document};
use serde_json::{json, Value};

use crate::unique;

/// A fresh collection name of letters, digits and underscores only: the MongoDB-compatible test server
/// (nx-27017, collections as SQLite tables) rejects other characters such as the `-` of [`unique`], which real
/// MongoDB accepts. Engine collection names are plain identifiers, so nothing is lost.
fn fresh_collection() -> String {
    unique("docs").replace('-', "_")
}

/// `insert` then `get` returns the body as given (no id injected); a second `insert` of the id is a
/// `Conflict` and leaves the first body; a missing id reads as `None`.
pub async fn insert_get_and_conflict(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let body = json!({ "name": "first", "tags": ["a", "b"], "nested": { "ok": true, "none": null } });
    store.insert(&collection, "doc-1", body.clone()).await.expect("insert");

    assert_eq!(store.get(&collection, "doc-1").await.expect("get"), Some(body.clone()));
    assert_eq!(store.get(&collection, "doc-2").await.expect("get missing"), None);

    let again = store.insert(&collection, "doc-1", json!({ "name": "second" })).await;
    assert!(matches!(again, Err(PortError::Conflict(_))), "duplicate insert must conflict, got {again:?}");
    assert_eq!(
        store.get(&collection, "doc-1").await.expect("get after conflict"),
        Some(body),
        "a refused insert must not change the stored document"
    );

    // The same id in another collection is a different document.
    let other = fresh_collection();
    store.insert(&other, "doc-1", json!({ "name": "other" })).await.expect("insert in other collection");
    assert_eq!(store.get(&other, "doc-1").await.expect("get other"), Some(json!({ "name": "other" })));
    assert_eq!(store.list(&collection).await.expect("list").len(), 1);
}

/// `list` returns every document of the collection sorted by id, whatever the insertion order; an unknown
/// collection lists as empty.
pub async fn list_sorted_by_id(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    assert!(store.list(&collection).await.expect("list empty").is_empty());
    for id in ["m", "b", "z", "a", "b2"] {
        store.insert(&collection, id, json!({ "id": id })).await.expect("insert");
    }
    let ids: Vec<Value> = store.list(&collection).await.expect("list").into_iter().map(|d| d["id"].clone()).collect();
    assert_eq!(ids, vec![json!("a"), json!("b"), json!("b2"), json!("m"), json!("z")]);
}

/// `replace` of a missing id returns false and stores nothing; of an existing id it returns true and swaps the
/// whole body. `upsert` creates or overwrites.
pub async fn replace_and_upsert(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let replaced = store.replace(&collection, "missing", json!({ "v": 1 })).await.expect("replace missing");
    assert!(!replaced, "replace of a missing id must return false");
    assert_eq!(store.get(&collection, "missing").await.expect("get"), None, "replace must not create");

    store.insert(&collection, "d", json!({ "v": 1, "old": "field" })).await.expect("insert");
    assert!(store.replace(&collection, "d", json!({ "v": 2 })).await.expect("replace"));
    assert_eq!(
        store.get(&collection, "d").await.expect("get"),
        Some(json!({ "v": 2 })),
        "replace swaps the whole body"
    );

    store.upsert(&collection, "u", json!({ "v": "new" })).await.expect("upsert new");
    assert_eq!(store.get(&collection, "u").await.expect("get"), Some(json!({ "v": "new" })));
    store.upsert(&collection, "u", json!({ "v": "again" })).await.expect("upsert existing");
    assert_eq!(store.get(&collection, "u").await.expect("get"), Some(json!({ "v": "again" })));
    assert_eq!(store.list(&collection).await.expect("list").len(), 2);

    // Several at once: new ones created, existing ones replaced and their version moved on.
    let before = store.get_versioned(&collection, "u").await.expect("get").expect("u").version;
    let batch = vec![
        ("u".to_owned(), json!({ "v": "batch" })),
        ("m1".to_owned(), json!({ "v": 1 })),
        ("m2".to_owned(), json!({ "v": 2 })),
    ];
    store.upsert_many(&collection, batch).await.expect("upsert_many");
    let u = store.get_versioned(&collection, "u").await.expect("get").expect("u");
    assert_eq!((u.body, u.version), (json!({ "v": "batch" }), before + 1));
    assert_eq!(store.get(&collection, "m2").await.expect("get"), Some(json!({ "v": 2 })));
    assert_eq!(store.list(&collection).await.expect("list").len(), 4);
    store.upsert_many(&collection, Vec::new()).await.expect("an empty batch is nothing to do");

    // Several read at once by id: only those that exist, each with its body.
    let ids: Vec<String> = ["m1", "nope", "u", "m1"].iter().map(|s| (*s).to_owned()).collect();
    let found = store.get_many(&collection, &ids).await.expect("get_many");
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found["m1"].clone(), found["u"].clone()), (json!({ "v": 1 }), json!({ "v": "batch" })));
    assert!(store.get_many(&collection, &[]).await.expect("get_many of nothing").is_empty());
    // Which exist, without their bodies.
    let existing = store.existing(&collection, &ids).await.expect("existing");
    assert_eq!(existing, ["m1", "u"].iter().map(|s| (*s).to_owned()).collect());
    assert!(store.existing(&collection, &[]).await.expect("existing of nothing").is_empty());
    let many: Vec<String> = (0..1200).map(|i| format!("x{i}")).chain(["m2".to_owned()]).collect();
    assert_eq!(store.existing(&collection, &many).await.expect("existing of many"), ["m2".to_owned()].into());

    // Bodies already serialized: stored and read back as the same documents, versions moved on; a body that
    // is not a JSON object is refused and nothing of the batch is written.
    let before = store.get_versioned(&collection, "m1").await.expect("get").expect("m1").version;
    let texts = vec![("m1".to_owned(), r#"{"v":"text","n":[1,2.5]}"#.to_owned()), ("j1".to_owned(), "{}".to_owned())];
    store.upsert_many_json(&collection, texts).await.expect("upsert_many_json");
    let m1 = store.get_versioned(&collection, "m1").await.expect("get").expect("m1");
    assert_eq!((m1.body, m1.version), (json!({ "v": "text", "n": [1, 2.5] }), before + 1));
    assert_eq!(store.get(&collection, "j1").await.expect("get"), Some(json!({})));
    let bad = vec![("j2".to_owned(), "{}".to_owned()), ("j3".to_owned(), "[1]".to_owned())];
    assert!(matches!(store.upsert_many_json(&collection, bad).await, Err(PortError::Invalid(_))));
    assert_eq!(store.get(&collection, "j2").await.expect("get"), None);
}

/// `find` matches one top-level field by string, integer, float and boolean, sorted by id, and never matches
/// across JSON types (`"1"` is not `1`).
pub async fn find_by_field(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let docs = [
        ("c", json!({ "id": "c", "kind": "order", "qty": 2, "price": 1.5, "paid": true })),
        ("a", json!({ "id": "a", "kind": "order", "qty": 1, "price": 2.25, "paid": false })),
        ("b", json!({ "id": "b", "kind": "refund", "qty": 2, "price": 1.5, "paid": true })),
        ("d", json!({ "id": "d", "kind": "order", "qty": "2", "price": "1.5", "paid": "true" })),
        ("e", json!({ "id": "e", "nested": { "kind": "order" } })),
        ("f", json!({ "id": "f", "kind": ["order"], "qty": [2], "paid": [true] })),
    ];
    for (id, doc) in docs {
        store.insert(&collection, id, doc).await.expect("insert");
    }
    let ids =
        |found: Vec<Value>| found.into_iter().map(|d| d["id"].as_str().unwrap_or("?").to_owned()).collect::<Vec<_>>();

    let by_string = store.find(&collection, "kind", &json!("order")).await.expect("find string");
    assert_eq!(ids(by_string), ["a", "c", "d"], "string equality, sorted by id, top-level only, not array members");
    let by_int = store.find(&collection, "qty", &json!(2)).await.expect("find integer");
    assert_eq!(ids(by_int), ["b", "c"], "integer equality does not match the string \"2\"");
    let by_float = store.find(&collection, "price", &json!(1.5)).await.expect("find float");
    assert_eq!(ids(by_float), ["b", "c"]);
    let by_bool = store.find(&collection, "paid", &json!(true)).await.expect("find bool");
    assert_eq!(ids(by_bool), ["b", "c"], "boolean equality does not match the string \"true\"");
    let by_string_number = store.find(&collection, "qty", &json!("2")).await.expect("find string number");
    assert_eq!(ids(by_string_number), ["d"]);

    assert!(store.find(&collection, "kind", &json!("none")).await.expect("find none").is_empty());
    assert!(store.find(&collection, "missing", &json!(1)).await.expect("find missing field").is_empty());
    assert!(store.find(&fresh_collection(), "kind", &json!("order")).await.expect("find empty").is_empty());
}

/// `delete` reports whether the id existed; `delete_where` removes exactly the documents whose top-level field
/// equals the value (not array members, not other types) and returns how many.
pub async fn delete_and_delete_where(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let docs = [
        ("1", json!({ "id": "1", "owner": "ann", "n": 1 })),
        ("2", json!({ "id": "2", "owner": "bob", "n": 2 })),
        ("3", json!({ "id": "3", "owner": "ann", "n": 1 })),
        ("4", json!({ "id": "4", "owner": "ann", "n": 3 })),
        ("5", json!({ "id": "5", "owner": "cy", "n": 1 })),
        ("6", json!({ "id": "6", "owner": ["ann"], "n": "1" })),
    ];
    for (id, doc) in docs {
        store.insert(&collection, id, doc).await.expect("insert");
    }
    assert!(store.delete(&collection, "5").await.expect("delete"));
    assert!(!store.delete(&collection, "5").await.expect("delete again"), "second delete finds nothing");
    assert_eq!(store.get(&collection, "5").await.expect("get"), None);

    let by_owner = store.delete_where(&collection, "owner", &json!("ann")).await;
    assert_eq!(by_owner.expect("delete_where"), 3);
    let again = store.delete_where(&collection, "owner", &json!("ann")).await;
    assert_eq!(again.expect("delete_where again"), 0);
    let ids = |docs: Vec<Value>| docs.into_iter().map(|d| d["id"].clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list(&collection).await.expect("list")),
        [json!("2"), json!("6")],
        "only exact top-level matches are removed"
    );

    let by_number = store.delete_where(&collection, "n", &json!(2)).await;
    assert_eq!(by_number.expect("delete_where number"), 1, "the string \"1\" is not the number 2 nor 1");
    assert_eq!(ids(store.list(&collection).await.expect("list")), [json!("6")]);
}

/// `delete_matching` removes exactly the documents matching every filter of the query (ranges and sets over
/// typed values, as `query` matches them) and returns how many.
pub async fn delete_matching(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    for (id, status, at) in [("1", "done", 10), ("2", "done", 20), ("3", "open", 10), ("4", "done", 30), ("5", "x", 5)]
    {
        store.insert(&collection, id, json!({ "id": id, "status": status, "at": at })).await.expect("insert");
    }
    store.insert(&collection, "6", json!({ "id": "6", "status": "done", "at": "10" })).await.expect("insert");
    let old_done =
        Query::new().filter("status", Filter::In(vec![json!("done"), json!("x")])).filter("at", Filter::Lte(json!(20)));
    assert_eq!(store.delete_matching(&collection, &old_done).await.expect("delete_matching"), 3);
    assert_eq!(store.delete_matching(&collection, &old_done).await.expect("again"), 0);
    let ids: Vec<Value> = store.list(&collection).await.expect("list").into_iter().map(|d| d["id"].clone()).collect();
    assert_eq!(ids, [json!("3"), json!("4"), json!("6")], "the string \"10\" is not a number at most 20");
    let bad = Query::new().filter("$where", Filter::Eq(json!(1)));
    assert!(matches!(store.delete_matching(&collection, &bad).await, Err(PortError::Invalid(_))));
}

/// Numbers keep their kind: integers (including beyond 2^53 and negatives) stay integers and floats, even
/// whole ones, stay floats; nested objects, arrays and nulls come back intact.
pub async fn numbers_round_trip(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let body = json!({
        "small": 7,
        "negative": -42,
        "big": 9_007_199_254_740_993_i64,
        "max": i64::MAX,
        "float": 1.25,
        "whole_float": 2.0,
        "tiny": 1e-9,
        "list": [1, 2.5, "three", null, false],
        "deep": { "n": 3, "f": 0.5 },
    });
    store.insert(&collection, "n", body.clone()).await.expect("insert");
    let back = store.get(&collection, "n").await.expect("get").expect("present");
    assert_eq!(back, body);
    for field in ["small", "negative", "big", "max"] {
        assert!(back[field].is_i64(), "{field} must stay an integer, got {}", back[field]);
    }
    assert_eq!(back["big"].as_i64(), Some(9_007_199_254_740_993));
    for field in ["float", "whole_float", "tiny"] {
        assert!(back[field].is_f64(), "{field} must stay a float, got {}", back[field]);
    }
    assert!(back["deep"]["n"].is_i64() && back["deep"]["f"].is_f64());
    assert!(back["list"][0].is_i64() && back["list"][1].is_f64());
}

/// Far enough in the future that MongoDB's own TTL monitor (real time) never removes a document these checks
/// expect to find: the checks move "now" by passing it to `sweep_expired`.
const FUTURE_MS: i64 = 4_102_444_800_000; // 2100-01-01
/// Later than every expiry used here, yet a date every MongoDB-protocol server can represent (the test server's
/// dates end in year 9999, so `i64::MAX` is out).
const MUCH_LATER_MS: i64 = FUTURE_MS + 100 * 365 * 24 * 3600 * 1000;

/// `upsert_expiring` stores a document that reads like any other (no expiry field shows in get, list or find);
/// `sweep_expired(now)` removes exactly the documents of that collection whose expiry is at or before `now`
/// and returns how many; documents written with `insert`, `upsert` or `replace` never expire, also when they
/// overwrite an expiring one; a new `upsert_expiring` moves the expiry. `insert_expiring` stores only a new id:
/// over an existing one it is `Conflict` and changes neither the body nor the expiry.
pub async fn expiring_documents(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let other = fresh_collection();
    let t = FUTURE_MS;
    store.upsert_expiring(&collection, "soon", json!({ "id": "soon", "k": "x" }), t).await.expect("expiring");
    store.upsert_expiring(&collection, "later", json!({ "id": "later", "k": "x" }), t + 1000).await.expect("later");
    store.insert(&collection, "forever", json!({ "id": "forever", "k": "x" })).await.expect("insert");
    store.upsert_expiring(&collection, "upserted", json!({ "id": "upserted" }), t).await.expect("expiring");
    store.upsert(&collection, "upserted", json!({ "id": "upserted", "v": 2 })).await.expect("upsert over it");
    store.upsert_expiring(&collection, "replaced", json!({ "id": "replaced" }), t).await.expect("expiring");
    assert!(store.replace(&collection, "replaced", json!({ "id": "replaced", "v": 2 })).await.expect("replace"));
    store.upsert_expiring(&other, "soon", json!({ "id": "soon" }), t).await.expect("other collection");

    assert_eq!(
        store.get(&collection, "soon").await.expect("get"),
        Some(json!({ "id": "soon", "k": "x" })),
        "an expiring document reads as given, the expiry hidden"
    );
    assert_eq!(store.find(&collection, "k", &json!("x")).await.expect("find").len(), 3);
    assert_eq!(store.list(&collection).await.expect("list").len(), 5, "not yet swept: still listed");

    assert_eq!(store.sweep_expired(&collection, t - 1).await.expect("sweep early"), 0, "nothing expired yet");
    assert_eq!(store.sweep_expired(&collection, t).await.expect("sweep at t"), 1, "expiry at or before now");
    assert_eq!(store.get(&collection, "soon").await.expect("get swept"), None);
    assert!(store.get(&collection, "later").await.expect("get later").is_some());
    assert_eq!(store.sweep_expired(&collection, t + 1000).await.expect("sweep later"), 1);
    let ids: Vec<Value> = store.list(&collection).await.expect("list").into_iter().map(|d| d["id"].clone()).collect();
    assert_eq!(ids, [json!("forever"), json!("replaced"), json!("upserted")], "only expiring documents are swept");
    assert_eq!(store.sweep_expired(&collection, MUCH_LATER_MS).await.expect("sweep all"), 0, "the rest never expires");

    // Sweeps are per collection, and a new upsert_expiring moves the expiry.
    assert!(store.get(&other, "soon").await.expect("other").is_some(), "another collection is not swept");
    store.upsert_expiring(&other, "soon", json!({ "id": "soon", "v": 9 }), t + 5000).await.expect("extend");
    assert_eq!(store.sweep_expired(&other, t + 4999).await.expect("sweep other"), 0);
    assert_eq!(store.get(&other, "soon").await.expect("get"), Some(json!({ "id": "soon", "v": 9 })));
    assert_eq!(store.sweep_expired(&other, t + 5000).await.expect("sweep other"), 1);
    assert_eq!(store.sweep_expired(&fresh_collection(), MUCH_LATER_MS).await.expect("sweep empty"), 0);

    // insert_expiring: once per id, the first body and expiry kept.
    let once = fresh_collection();
    store.insert_expiring(&once, "m", json!({ "id": "m", "v": 1 }), t).await.expect("insert_expiring");
    let again = store.insert_expiring(&once, "m", json!({ "id": "m", "v": 2 }), t + 5000).await;
    assert!(matches!(again, Err(PortError::Conflict(_))), "a second insert_expiring of an id: {again:?}");
    store.insert(&once, "kept", json!({ "id": "kept" })).await.expect("insert");
    let over = store.insert_expiring(&once, "kept", json!({ "id": "kept", "v": 2 }), t).await;
    assert!(matches!(over, Err(PortError::Conflict(_))), "insert_expiring over an inserted id: {over:?}");
    assert_eq!(store.get(&once, "m").await.expect("get"), Some(json!({ "id": "m", "v": 1 })), "the first body");
    assert_eq!(store.sweep_expired(&once, t).await.expect("sweep once"), 1, "the first expiry");
    assert_eq!(store.get(&once, "m").await.expect("get swept"), None);
    assert_eq!(store.get(&once, "kept").await.expect("get kept"), Some(json!({ "id": "kept" })), "never expires");
    store.insert_expiring(&once, "m", json!({ "id": "m", "v": 3 }), t).await.expect("a swept id is new again");
}

fn ids(items: &[Value]) -> Vec<String> {
    items.iter().map(|item| item["id"].as_str().expect("every test document has an id").to_owned()).collect()
}

/// Seeds documents for the query checks: nested `player.country`, numbers in `amount`, strings in `game`, and
/// a document whose `amount` is the string `"50"` (which no numeric comparison may match).
async fn seed_events(store: &Arc<dyn DocumentStore>, collection: &str) {
    let rows = [
        ("e1", "de", 10, "slots"),
        ("e2", "fr", 50, "poker"),
        ("e3", "de", 50, "live"),
        ("e4", "it", 90, "slots"),
        ("e5", "de", 120, "poker"),
    ];
    for (id, country, amount, game) in rows {
        let body = json!({ "id": id, "player": { "country": country }, "amount": amount, "game": game });
        store.insert(collection, id, body).await.expect("insert");
    }
    store
        .insert(collection, "e6", json!({ "id": "e6", "player": { "country": "de" }, "amount": "50", "game": "x" }))
        .await
        .expect("insert");
}

/// Equality on a nested path, `in` on strings and numbers, and ranges on numbers and strings, never across JSON
/// types; several filters combine with AND.
pub async fn query_filters(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    seed_events(&store, &collection).await;
    let page = store.query(&collection, &Query::new().eq("player.country", json!("de"))).await.expect("nested eq");
    assert_eq!(ids(&page.items), ["e1", "e3", "e5", "e6"]);
    assert_eq!(page.total, 4);

    let numbers = Query::new().eq("amount", json!(50));
    assert_eq!(ids(&store.query(&collection, &numbers).await.expect("eq").items), ["e2", "e3"], "\"50\" is not 50");

    let within = Query::new().filter("game", Filter::In(vec![json!("poker"), json!("live")]));
    assert_eq!(ids(&store.query(&collection, &within).await.expect("in").items), ["e2", "e3", "e5"]);
    let in_numbers = Query::new().filter("amount", Filter::In(vec![json!(10), json!(120), json!(7)]));
    assert_eq!(ids(&store.query(&collection, &in_numbers).await.expect("in numbers").items), ["e1", "e5"]);
    let empty_in = Query::new().filter("amount", Filter::In(vec![]));
    assert_eq!(store.query(&collection, &empty_in).await.expect("empty in").total, 0);

    let range = Query::new().filter("amount", Filter::Gte(json!(50))).filter("amount", Filter::Lt(json!(120)));
    assert_eq!(ids(&store.query(&collection, &range).await.expect("range").items), ["e2", "e3", "e4"]);
    let above = Query::new().filter("amount", Filter::Gt(json!(90)));
    assert_eq!(ids(&store.query(&collection, &above).await.expect("gt").items), ["e5"]);
    let strings = Query::new().filter("game", Filter::Lte(json!("poker")));
    assert_eq!(ids(&store.query(&collection, &strings).await.expect("string range").items), ["e2", "e3", "e5"]);

    let both = Query::new().eq("player.country", json!("de")).filter("amount", Filter::Gt(json!(20)));
    assert_eq!(ids(&store.query(&collection, &both).await.expect("and").items), ["e3", "e5"]);

    let bad = store.query(&collection, &Query::new().eq("a..b", json!(1))).await;
    assert!(matches!(bad, Err(PortError::Invalid(_))), "a malformed path is invalid, got {bad:?}");

    // An array whose JSON text is the same as a string's, and a boolean where numbers are compared.
    let array = json!({ "id": "e7", "game": ["live"], "amount": true, "player": { "country": ["de"] } });
    store.insert(&collection, "e7", array).await.expect("insert");
    let text = json!({ "id": "e8", "game": "[\"live\"]", "amount": 1, "player": { "country": "{}" } });
    store.insert(&collection, "e8", text).await.expect("insert");
    let looks_like_array = Query::new().eq("game", json!("[\"live\"]"));
    assert_eq!(ids(&store.query(&collection, &looks_like_array).await.expect("eq").items), ["e8"], "not the array");
    let mixed = Query::new().filter("game", Filter::In(vec![json!("[\"live\"]"), json!("live"), json!(true)]));
    assert_eq!(ids(&store.query(&collection, &mixed).await.expect("mixed in").items), ["e3", "e8"]);
    let truth = Query::new().filter("amount", Filter::In(vec![json!(true), json!(90)]));
    let truth = ids(&store.query(&collection, &truth).await.expect("bool in").items);
    assert!(truth.contains(&"e4".to_owned()) && truth.contains(&"e7".to_owned()), "{truth:?}");

    // A long list is one membership test, not one comparison per value.
    let mut many: Vec<Value> = (0..5_000).map(|n| json!(format!("game-{n}"))).collect();
    many.extend([json!("slots"), json!(50)]);
    let long = Query::new().filter("game", Filter::In(many));
    assert_eq!(ids(&store.query(&collection, &long).await.expect("long in").items), ["e1", "e4"]);
}

/// Sorting ascending and descending with ties broken by id in the last sort key's direction, then limit/offset
/// with the total of all matches.
pub async fn query_sort_and_page(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    seed_events(&store, &collection).await;
    let numeric = Query::new().filter("amount", Filter::Gte(json!(0)));

    let ascending = numeric.clone().sort("amount", Direction::Asc);
    assert_eq!(ids(&store.query(&collection, &ascending).await.expect("asc").items), ["e1", "e2", "e3", "e4", "e5"]);
    let descending = numeric.clone().sort("amount", Direction::Desc);
    assert_eq!(
        ids(&store.query(&collection, &descending).await.expect("desc").items),
        ["e5", "e4", "e3", "e2", "e1"],
        "ties (e2, e3 at 50) in descending id order when descending"
    );
    let two_keys = numeric.clone().sort("player.country", Direction::Desc).sort("amount", Direction::Desc);
    assert_eq!(
        ids(&store.query(&collection, &two_keys).await.expect("two keys").items),
        ["e4", "e2", "e5", "e3", "e1"]
    );

    let page = store.query(&collection, &ascending.clone().offset(1).limit(2)).await.expect("page");
    assert_eq!(ids(&page.items), ["e2", "e3"]);
    assert_eq!(page.total, 5, "total counts every match, not the page");
    let uncounted = store.query(&collection, &ascending.clone().offset(1).limit(2).without_total()).await;
    let uncounted = uncounted.expect("page without total");
    assert_eq!((ids(&uncounted.items), uncounted.total), (vec!["e2".to_owned(), "e3".to_owned()], 2));
    let past_end = store.query(&collection, &ascending.clone().offset(4).limit(10)).await.expect("last page");
    assert_eq!((ids(&past_end.items), past_end.total), (vec!["e5".to_owned()], 5));
    let nothing = store.query(&collection, &ascending.offset(9)).await.expect("beyond");
    assert_eq!((nothing.items.len(), nothing.total), (0, 5));

    let all = store.query(&collection, &Query::new()).await.expect("everything");
    assert_eq!(
        (ids(&all.items), all.total),
        (vec!["e1", "e2", "e3", "e4", "e5", "e6"].into_iter().map(String::from).collect(), 6)
    );
}

/// Versions: 1 on insert, +1 on every write; a stale `replace_if_version` stores nothing; two concurrent
/// replacements of the same version: exactly one wins. The body stays as given.
pub async fn versioned_replace(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    store.insert(&collection, "p", json!({ "state": "online" })).await.expect("insert");
    let first = store.get_versioned(&collection, "p").await.expect("get").expect("exists");
    assert_eq!((first.version, first.body), (1, json!({ "state": "online" })));

    let two = store.replace_if_version(&collection, "p", 1, json!({ "state": "away" })).await.expect("cas");
    assert_eq!(two, Some(2));
    let stale = store.replace_if_version(&collection, "p", 1, json!({ "state": "stale" })).await.expect("stale");
    assert_eq!(stale, None, "a stale version must not write");
    assert_eq!(store.get(&collection, "p").await.expect("get"), Some(json!({ "state": "away" })));

    store.upsert(&collection, "p", json!({ "state": "busy" })).await.expect("upsert");
    assert_eq!(store.get_versioned(&collection, "p").await.expect("get").expect("exists").version, 3);
    assert!(store.replace(&collection, "p", json!({ "state": "idle" })).await.expect("replace"));
    assert_eq!(store.get_versioned(&collection, "p").await.expect("get").expect("exists").version, 4);
    store.upsert(&collection, "new", json!({ "state": "x" })).await.expect("upsert new");
    assert_eq!(store.get_versioned(&collection, "new").await.expect("get").expect("exists").version, 1);
    let missing = store.replace_if_version(&collection, "absent", 1, json!({})).await.expect("missing");
    assert_eq!(missing, None);
    assert_eq!(store.get_versioned(&collection, "absent").await.expect("get"), None);

    for round in 0..5 {
        let id = format!("race{round}");
        store.insert(&collection, &id, json!({ "winner": null })).await.expect("insert");
        let (a, b) = tokio::join!(
            store.replace_if_version(&collection, &id, 1, json!({ "winner": "a" })),
            store.replace_if_version(&collection, &id, 1, json!({ "winner": "b" })),
        );
        let (a, b) = (a.expect("writer a"), b.expect("writer b"));
        assert!(a.is_some() != b.is_some(), "exactly one of two concurrent replacements wins: {a:?} {b:?}");
        let winner = if a.is_some() { "a" } else { "b" };
        let stored = store.get_versioned(&collection, &id).await.expect("get").expect("exists");
        assert_eq!((stored.version, stored.body), (2, json!({ "winner": winner })));
    }
}

/// Batches: `get_many_versioned` answers the existing ids with their versions; `write_many_if_version` writes
/// each entry on its own terms and says which were written: a creation of an existing id, a stale version and
/// a missing document write nothing, the others do, in the same batch.
pub async fn versioned_batches(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    store.insert(&collection, "a", json!({ "n": 1 })).await.expect("insert a");
    store.insert(&collection, "b", json!({ "n": 1 })).await.expect("insert b");
    store.upsert(&collection, "b", json!({ "n": 2 })).await.expect("b to version 2");
    let ids: Vec<String> = ["a", "b", "absent"].map(str::to_owned).to_vec();
    let found = store.get_many_versioned(&collection, &ids).await.expect("read");
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found["a"].version, &found["a"].body), (1, &json!({ "n": 1 })));
    assert_eq!((found["b"].version, &found["b"].body), (2, &json!({ "n": 2 })));
    assert!(store.get_many_versioned(&collection, &[]).await.expect("nothing").is_empty());

    let write = |id: &str, expected: Option<u64>, n: i64| VersionedWrite {
        id: id.to_owned(),
        expected,
        doc: json!({ "n": n }),
    };
    let batch = vec![
        write("a", Some(1), 10),      // current: written
        write("b", Some(1), 20),      // stale: not written
        write("c", None, 30),         // new: created
        write("a", None, 40),         // exists: not created
        write("absent", Some(1), 50), // missing: not written
    ];
    let written = store.write_many_if_version(&collection, batch).await.expect("batch");
    assert_eq!(written, vec![Some(2), None, Some(1), None, None]);
    let after = store.get_many_versioned(&collection, &["a", "b", "c", "absent"].map(str::to_owned)).await.unwrap();
    assert_eq!((after["a"].version, &after["a"].body), (2, &json!({ "n": 10 })));
    assert_eq!((after["b"].version, &after["b"].body), (2, &json!({ "n": 2 })));
    assert_eq!((after["c"].version, &after["c"].body), (1, &json!({ "n": 30 })));
    assert!(!after.contains_key("absent"));
    assert_eq!(store.write_many_if_version(&collection, Vec::new()).await.expect("empty"), Vec::<Option<u64>>::new());
}

/// A unique index refuses a duplicate on insert, replace and upsert (`Conflict`), ensuring it again is a no-op,
/// and it constrains only its own collection; a compound unique index refuses only the full combination.
pub async fn unique_and_compound_indexes(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let unique = IndexSpec::ascending(&["email"]).unique();
    store.ensure_index(&collection, &unique).await.expect("ensure");
    store.ensure_index(&collection, &unique).await.expect("ensure again is a no-op");
    store.insert(&collection, "u1", json!({ "email": "a@x" })).await.expect("first");
    let duplicate = store.insert(&collection, "u2", json!({ "email": "a@x" })).await;
    assert!(matches!(duplicate, Err(PortError::Conflict(_))), "duplicate insert: {duplicate:?}");
    assert_eq!(store.get(&collection, "u2").await.expect("get"), None);
    store.insert(&collection, "u2", json!({ "email": "b@x" })).await.expect("distinct value");
    let replaced = store.replace(&collection, "u2", json!({ "email": "a@x" })).await;
    assert!(matches!(replaced, Err(PortError::Conflict(_))), "duplicate replace: {replaced:?}");
    let upserted = store.upsert(&collection, "u3", json!({ "email": "a@x" })).await;
    assert!(matches!(upserted, Err(PortError::Conflict(_))), "duplicate upsert: {upserted:?}");
    assert_eq!(store.get(&collection, "u2").await.expect("get"), Some(json!({ "email": "b@x" })));
    assert_eq!(store.get(&collection, "u3").await.expect("get"), None);

    let other = fresh_collection();
    store.insert(&other, "o1", json!({ "email": "a@x" })).await.expect("another collection");
    store.insert(&other, "o2", json!({ "email": "a@x" })).await.expect("no index there");

    let compound = fresh_collection();
    let spec = IndexSpec {
        fields: vec![("flow.id".into(), Direction::Asc), ("version".into(), Direction::Desc)],
        unique: true,
        sparse: false,
    };
    store.ensure_index(&compound, &spec).await.expect("compound");
    store.ensure_index(&compound, &spec).await.expect("compound again");
    store.insert(&compound, "a", json!({ "flow": { "id": "f" }, "version": 1 })).await.expect("a");
    store.insert(&compound, "b", json!({ "flow": { "id": "f" }, "version": 2 })).await.expect("b");
    store.insert(&compound, "c", json!({ "flow": { "id": "g" }, "version": 1 })).await.expect("c");
    let clash = store.insert(&compound, "d", json!({ "flow": { "id": "f" }, "version": 2 })).await;
    assert!(matches!(clash, Err(PortError::Conflict(_))), "full combination clash: {clash:?}");
    let plain = IndexSpec::ascending(&["status"]);
    store.ensure_index(&compound, &plain).await.expect("non-unique");
    store.ensure_index(&compound, &plain).await.expect("non-unique again");
    let page = store
        .query(&compound, &Query::new().eq("flow.id", json!("f")).sort("version", Direction::Desc))
        .await
        .expect("query over the index");
    assert_eq!(page.items[0]["version"], json!(2));
    assert_eq!(page.total, 2);
}

/// A sparse index leaves out the documents missing one of its fields, and queries answer exactly as without it
/// (those documents included, when the query does not need the field); a unique sparse index constrains only the
/// documents that have the field. Dropping an index is idempotent, also on a collection that does not exist,
/// and a dropped unique index no longer refuses duplicates, where the server `names_indexes` as asked (the
/// MongoDB-protocol test server names every index itself and ignores a drop by any other name; real MongoDB
/// keeps the given name).
pub async fn sparse_and_dropped_indexes(store: Arc<dyn DocumentStore>, names_indexes: bool) {
    let collection = fresh_collection();
    let due = IndexSpec::ascending(&["status", "due_ms"]).sparse();
    store.ensure_index(&collection, &due).await.expect("sparse");
    store.ensure_index(&collection, &due).await.expect("sparse again is a no-op");
    store.ensure_index(&collection, &IndexSpec::ascending(&["status", "due_ms"])).await.expect("a full one beside it");
    store.insert(&collection, "a", json!({ "status": "waiting", "due_ms": 5 })).await.expect("a");
    store.insert(&collection, "b", json!({ "status": "waiting" })).await.expect("b");
    store.insert(&collection, "c", json!({ "status": "done" })).await.expect("c");
    store.insert(&collection, "d", json!({ "status": "waiting", "due_ms": 9 })).await.expect("d");
    let ids = |page: flowhost_core::ports::Page| -> Vec<String> {
        page.items.iter().map(|doc| doc["due_ms"].to_string()).collect()
    };
    let due_by = Query::new()
        .eq("status", json!("waiting"))
        .filter("due_ms", Filter::Lte(json!(7)))
        .sort("due_ms", Direction::Asc);
    assert_eq!(ids(store.query(&collection, &due_by).await.expect("due")), vec!["5"]);
    let waiting = Query::new().eq("status", json!("waiting"));
    assert_eq!(store.query(&collection, &waiting).await.expect("waiting").total, 3, "b is found without the index");
    store.drop_index(&collection, &IndexSpec::ascending(&["status", "due_ms"])).await.expect("drop the full one");
    assert_eq!(store.query(&collection, &waiting).await.expect("waiting").total, 3);
    assert_eq!(ids(store.query(&collection, &due_by).await.expect("due")), vec!["5"]);

    let codes = fresh_collection();
    let code = IndexSpec::ascending(&["code"]).unique().sparse();
    store.ensure_index(&codes, &code).await.expect("unique sparse");
    store.insert(&codes, "x", json!({ "name": "x" })).await.expect("no code");
    store.insert(&codes, "y", json!({ "name": "y" })).await.expect("no code either: not constrained");
    store.insert(&codes, "z", json!({ "code": "c1" })).await.expect("a code");
    let clash = store.insert(&codes, "w", json!({ "code": "c1" })).await;
    assert!(matches!(clash, Err(PortError::Conflict(_))), "duplicate code: {clash:?}");
    store.drop_index(&codes, &code).await.expect("drop");
    store.drop_index(&codes, &code).await.expect("drop again is a no-op");
    if names_indexes {
        store.insert(&codes, "w", json!({ "code": "c1" })).await.expect("no longer constrained");
    }
    store.drop_index(&fresh_collection(), &code).await.expect("dropping on a collection that does not exist");
}

/// The same collection and id in two logical databases are two documents; `database` of the same name twice is
/// the same data.
pub async fn databases_are_separate(store: Arc<dyn DocumentStore>) {
    let collection = fresh_collection();
    let name = unique("db").replace('-', "_");
    let presence = store.database(&name).await.expect("database");
    store.insert(&collection, "x", json!({ "in": "main" })).await.expect("main");
    presence.insert(&collection, "x", json!({ "in": "other" })).await.expect("other");
    assert_eq!(store.get(&collection, "x").await.expect("get"), Some(json!({ "in": "main" })));
    assert_eq!(presence.get(&collection, "x").await.expect("get"), Some(json!({ "in": "other" })));
    let again = store.database(&name).await.expect("database again");
    assert_eq!(again.get(&collection, "x").await.expect("get"), Some(json!({ "in": "other" })));
    assert_eq!(store.list(&collection).await.expect("list").len(), 1);
    let bad = store.database("no-dashes").await;
    assert!(matches!(bad, Err(PortError::Invalid(_))), "database names are identifiers: {:?}", bad.err());
}

/// A value of the typed layer's test: one document per player, queried by country.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Player {
    id: String,
    country: String,
    score: i64,
}

impl Document for Player {
    const COLLECTION: &'static str = "players";

    fn id(&self) -> String {
        self.id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["country", "score"])]
    }
}

/// The typed layer over the port (`flowhost_core::stored`): values go in and come back as their type, ids come
/// from the value, versions guard replaces, and a stored document that no longer fits the type is one error,
/// `PortError::Malformed`, never a panic nor a silently different value; a value that cannot be encoded stores
/// nothing.
pub async fn typed_collections(store: Arc<dyn DocumentStore>) {
    let players = Collection::<Player>::named(store.clone(), &fresh_collection());
    players.ensure_indexes().await.expect("indexes");
    players.ensure_indexes().await.expect("indexes again");
    let ann = Player { id: "ann".into(), country: "MT".into(), score: 10 };
    let bob = Player { id: "bob".into(), country: "SE".into(), score: 7 };
    players.insert(&ann).await.expect("insert");
    assert!(matches!(players.insert(&ann).await, Err(PortError::Conflict(_))));
    players.upsert_many(std::slice::from_ref(&bob)).await.expect("upsert many");
    assert_eq!(players.get("ann").await.expect("get"), Some(ann.clone()));
    assert_eq!(players.get("nobody").await.expect("get missing"), None);
    assert_eq!(players.list().await.expect("list"), vec![ann.clone(), bob.clone()]);
    assert_eq!(players.find("country", &json!("SE")).await.expect("find"), vec![bob.clone()]);
    let page = players.query(&Query::new().eq("country", json!("MT")).limit(10)).await.expect("query");
    assert_eq!((page.items, page.total), (vec![ann.clone()], 1));

    let (stored, version) = players.get_versioned("ann").await.expect("versioned").expect("ann exists");
    let raised = Player { score: 11, ..stored };
    let next = players.replace_if_version(&raised, version).await.expect("replace").expect("current version");
    assert_eq!(players.replace_if_version(&raised, version).await.expect("stale replace"), None);
    assert_eq!(players.get_versioned("ann").await.expect("get").map(|(p, v)| (p.score, v)), Some((11, next)));

    // Written through the untyped port, a body missing a field of the type.
    store.upsert(players.name(), "cid", json!({ "id": "cid", "country": "MT" })).await.expect("raw");
    assert!(matches!(players.get("cid").await, Err(PortError::Malformed(_))));
    assert!(matches!(players.list().await, Err(PortError::Malformed(_))));
    assert_eq!(
        stored::decode_valid::<Player>(players.name(), store.list(players.name()).await.expect("raw list")).len(),
        2
    );
    assert!(players.delete("cid").await.expect("delete"));
    assert!(!players.delete("cid").await.expect("delete again"));

    // A map with non-string keys has no JSON form.
    let unencodable = std::collections::BTreeMap::from([((1, 2), "pair")]);
    assert!(matches!(stored::encode(players.name(), &unencodable), Err(PortError::Malformed(_))));
    assert_eq!(players.list().await.expect("list").len(), 2);
}
