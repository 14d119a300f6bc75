//! The OpenAPI documents against what is served: a host with every role, each listener on its own socket, serves
//! `GET /openapi.json` on every socket; every operation of a document is routed there (its answer is neither the
//! socket's answer to an unknown path nor 405); and no role builds a route outside the documenting router (a
//! source check: `.route(` appears only where the document says the route another way).

use std::collections::HashSet;
use std::path::Path;

use flowhost_tests::every_role::EveryRole;
use flowhost_tests::Backends;
use serde_json::Value;

/// Where a plain `.route(` is right, and why.
const PLAIN_ROUTES: [(&str, &str); 1] = [(
    "host/campaigns/src/explorer.rs",
    "the explorer's proxy mirrors every /api route under /explorer: the document's second server",
)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_socket_documents_what_it_routes() {
    let every = EveryRole::start(Backends::Embedded).await;
    let mut operations = 0;
    for base in &every.sockets {
        operations += check_socket(&every.host.http, base).await;
    }
    // The admin API alone has more than 50 operations; the total says nothing went undocumented wholesale.
    assert!(operations > 90, "only {operations} operations documented");
    every.host.stop().await;
}

/// Checks one socket's document against its routes; returns how many operations it documents.
async fn check_socket(http: &reqwest::Client, base: &str) -> usize {
    let document: Value = http.get(format!("{base}/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.0", "{base}");
    let unknown = answer(http, "GET", &format!("{base}/no-such-route-anywhere")).await;
    let mut ids = HashSet::new();
    let mut count = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            let method = method.to_ascii_uppercase();
            let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{base} {method} {path}: no id"));
            assert!(ids.insert(id.to_owned()), "{base}: operation id {id} twice");
            assert!(
                operation["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{base} {method} {path}: no responses"
            );
            let concrete = path.replace(['{', '}'], "");
            let got = answer(http, &method, &format!("{base}{concrete}")).await;
            assert_ne!(got.0, 405, "{base} {method} {path} is documented but not routed: {got:?}");
            assert_ne!(got, unknown, "{base} {method} {path} is documented but answers as an unknown path");
            count += 1;
        }
    }
    count
}

/// The status and body of `method url` (an empty JSON object as the body of a write).
async fn answer(http: &reqwest::Client, method: &str, url: &str) -> (u16, String) {
    let mut request = http.request(method.parse().unwrap(), url);
    if matches!(method, "POST" | "PUT" | "PATCH") {
        request = request.header("content-type", "application/json").body("{}");
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[test]
fn routes_are_built_only_by_the_documenting_router() {
    let root = flowhost_tests::cli::repository_root();
    let mut plain = Vec::new();
    visit(&root.join("host"), &mut |file| {
        let text = std::fs::read_to_string(file).unwrap();
        let relative = file.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
        for (number, line) in text.lines().enumerate() {
            if line.contains(".route(") && !PLAIN_ROUTES.iter().any(|(allowed, _)| *allowed == relative) {
                plain.push(format!("{relative}:{}: {}", number + 1, line.trim()));
            }
        }
    });
    assert!(
        plain.is_empty(),
        "routes outside the OpenAPI document (use routes!(..) on an ApiRouter):\n{}",
        plain.join("\n")
    );
}

fn visit(dir: &Path, each: &mut impl FnMut(&Path)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            // Test code may build throwaway routers (stand-in upstreams); generated and vendored trees are not ours.
            if !matches!(name.as_ref(), "tests" | "target" | "node_modules" | "web" | "fixtures") {
                visit(&path, each);
            }
        } else if name.ends_with(".rs") {
            each(&path);
        }
    }
}
