//! The documents port contract: ids are separate from bodies, `insert` conflicts on an existing id, `replace`
//! refuses a missing id, lists and finds are sorted by id, `find`/`delete_where` compare one top-level field, and
//! JSON numbers come back as the kind they went in (integer or float).

use std::sync::Arc;

use flowhost_core::ports::{DocumentStore, PortError};
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
/// overwrite an expiring one; a new `upsert_expiring` moves the expiry.
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
}
