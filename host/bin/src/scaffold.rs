//! `flowhost plugin new` and `flowhost plugin build`: a plugin project from templates carried in the binary
//! (`host/bin/templates/`), and its build into a component with the registry's toolchain only (cargo and the
//! `wasm32-wasip2` target).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// One file of a template: where it goes in the project, and its text with the placeholders [`fill`] replaces.
struct TemplateFile {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

/// A template file carried in the binary: `file!("rust/Cargo.toml.tmpl" => "Cargo.toml")`.
macro_rules! file {
    ($template:literal => $path:literal) => {
        TemplateFile { path: $path, text: include_str!(concat!("../templates/", $template)), executable: false }
    };
    ($template:literal => $path:literal, executable) => {
        TemplateFile { path: $path, text: include_str!(concat!("../templates/", $template)), executable: true }
    };
}

/// The files every Rust project has, whatever its world.
const RUST_COMMON: &[TemplateFile] = &[
    file!("rust/Cargo.toml.tmpl" => "Cargo.toml"),
    file!("rust/build.sh.tmpl" => "build.sh", executable),
    file!("rust/README.md.tmpl" => "README.md"),
    file!("rust/gitignore.tmpl" => ".gitignore"),
];

/// What a project of one world is: its own files and the words its README uses.
struct World {
    name: &'static str,
    /// The README's sentence on what the plugin does.
    what: &'static str,
    /// The action `plugin test` runs in the README.
    action: &'static str,
    /// The README's paragraph on using it in a flow.
    studio: &'static str,
    files: &'static [TemplateFile],
}

/// The Rust templates, by world.
const RUST_WORLDS: &[World] = &[
    World {
        name: "action",
        what: "Its one action, `greet`, turns its configuration (what a flow author sets on the node, \
               `{{placeholders}}` filled from the event) into a message.",
        action: "greet",
        studio: "Then, in Studio, place `greet` in a flow and set `player_id` to `{{player_id}}`.",
        files: &[
            file!("rust/action/lib.rs.tmpl" => "src/lib.rs"),
            file!("rust/action/example-input.json.tmpl" => "example-input.json"),
        ],
    },
    World {
        name: "service",
        what: "A service: its action, `tag`, tags a player with a segment, and its data source, `segments`, gives \
               Studio's form the choices.",
        action: "tag",
        studio: "Then, in Studio, place `tag` in a flow, set `player_id` to `{{player_id}}` and pick a segment.",
        files: &[
            file!("rust/service/lib.rs.tmpl" => "src/lib.rs"),
            file!("rust/service/example-input.json.tmpl" => "example-input.json"),
        ],
    },
    World {
        name: "node-kind",
        what: "Its node kind, `__NAME__`, lets an event through when a number field reaches a threshold. Called as an \
               action (as `plugin test` does), its input is `{\"config\": ..., \"event\": ...}`.",
        action: "__NAME__",
        studio: "Then, in Studio, place a `__NAME__` node in a flow and set its field and threshold.",
        files: &[
            file!("rust/node-kind/lib.rs.tmpl" => "src/lib.rs"),
            file!("rust/node-kind/example-input.json.tmpl" => "example-input.json"),
        ],
    },
];

/// The worlds `plugin new --world` knows, as its errors list them.
pub const WORLDS: &str = "action, service, node-kind";

/// The SDK this binary was built with, when its source is still where it was built (a checkout of Flowhost).
fn default_sdk() -> anyhow::Result<String> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk-guest");
    match sdk.canonicalize() {
        Ok(path) => Ok(format!("{{ path = {:?} }}", path.display().to_string())),
        Err(_) => bail!(
            "this binary's SDK source is not at hand: name the SDK with --sdk, e.g. \
             --sdk '{{ path = \"/src/flowhost/sdk-guest\" }}' or --sdk '{{ git = \"<URL of the Flowhost repository>\" }}'"
        ),
    }
}

/// A plugin id that is also a cargo package name and a path segment: lowercase letters, digits and `-`,
/// starting with a letter, at most 63 characters.
fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !valid {
        bail!(
            "{name:?} is not a plugin name: use lowercase letters, digits and '-', starting with a letter (at most 63)"
        );
    }
    Ok(())
}

/// `greeter-two` as a Rust type name: `GreeterTwo`.
fn type_name(name: &str) -> String {
    name.split('-')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// Writes a new plugin project `name` into `dir` (which must not exist yet, or be empty): the manifest with one
/// action (or node kind) and its `config_schema`, unit tests, an example input, a build script and a README.
/// `sdk` is the SDK dependency as Cargo.toml writes it (default: this binary's SDK). Answers the files written.
pub fn new_project(dir: &Path, name: &str, lang: &str, world: &str, sdk: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    check_name(name)?;
    if lang != "rust" {
        bail!("no template for {lang:?} yet (known: rust)");
    }
    let Some(world) = RUST_WORLDS.iter().find(|known| known.name == world) else {
        bail!("no template for the {world:?} world (known: {WORLDS})");
    };
    if dir.exists() && dir.read_dir().with_context(|| format!("reading {}", dir.display()))?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let sdk = match sdk {
        Some(sdk) => sdk.to_owned(),
        None => default_sdk()?,
    };
    let fill = |text: &str| {
        text.replace("__WHAT__", world.what)
            .replace("__STUDIO__", world.studio)
            .replace("__ACTION__", world.action)
            .replace("__WORLD__", world.name)
            .replace("__NAME__", name)
            .replace("__CRATE__", &name.replace('-', "_"))
            .replace("__TYPE__", &type_name(name))
            .replace("__SDK__", &sdk)
    };
    let mut written = Vec::new();
    for file in RUST_COMMON.iter().chain(world.files) {
        let path = dir.join(file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, fill(file.text)).with_context(|| format!("writing {}", path.display()))?;
        if file.executable {
            make_executable(&path)?;
        }
        written.push(path);
    }
    Ok(written)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Builds the plugin project in `dir` into a component with cargo for `wasm32-wasip2` (adding the target with
/// rustup when the toolchain lacks it), into `target_dir` (default `dir/target`); answers the component's path.
/// Cargo's progress goes to standard error as it comes.
pub fn build_project(dir: &Path, target_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let package: toml::Table = toml::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
    let Some(name) = package.get("package").and_then(|p| p.get("name")).and_then(|n| n.as_str()) else {
        bail!("{} names no [package] name", manifest.display());
    };
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().context("running rustc")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot.join("lib/rustlib/wasm32-wasip2").is_dir() {
        let status =
            Command::new("rustup").args(["target", "add", "wasm32-wasip2"]).status().context("running rustup")?;
        if !status.success() {
            bail!("rustup target add wasm32-wasip2 failed ({status})");
        }
    }
    let target_dir = target_dir.map_or_else(|| dir.join("target"), Path::to_path_buf);
    let status = Command::new("cargo")
        .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        // An outer cargo's settings (a test runs this) are for its own native build, not this one.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_MAKEFLAGS")
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    let component = target_dir.join("wasm32-wasip2/release").join(format!("{}.wasm", name.replace('-', "_")));
    if !component.is_file() {
        bail!("cargo built no component at {}", component.display());
    }
    Ok(component)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plugin_ids_and_types() {
        for good in ["greeter", "first-action", "a1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Greeter", "1st", "greet_er", "greeter-", "a b", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(type_name("greeter-two"), "GreeterTwo");
    }

    #[test]
    fn a_project_is_every_template_file_filled() {
        let dir = std::env::temp_dir().join(format!("flowhost-scaffold-{}", std::process::id()));
        for world in RUST_WORLDS {
            let _ = std::fs::remove_dir_all(&dir);
            let written = new_project(&dir, "greeter-two", "rust", world.name, Some("{ path = \"/sdk\" }")).unwrap();
            assert_eq!(written.len(), RUST_COMMON.len() + world.files.len());
            let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
            assert!(
                lib.contains("pub struct GreeterTwoPlugin;") && lib.contains("Manifest::new(\"greeter-two\""),
                "{lib}"
            );
            for path in &written {
                let text = std::fs::read_to_string(path).unwrap();
                assert!(!text.contains("__"), "{} of {} is not filled: {text}", path.display(), world.name);
            }
            let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            assert!(cargo.contains("flowhost-sdk-guest = { path = \"/sdk\" }"), "{cargo}");
            let example = std::fs::read_to_string(dir.join("example-input.json")).unwrap();
            assert!(serde_json::from_str::<serde_json::Value>(&example).is_ok(), "{example}");
        }
        // Never over an author's files.
        assert!(new_project(&dir, "greeter-two", "rust", "action", None).is_err());
        let _ = std::fs::remove_dir_all(&dir);
        let unknown = new_project(&dir, "greeter", "rust", "projector", None).unwrap_err().to_string();
        assert!(unknown.contains(WORLDS), "{unknown}");
        assert!(new_project(&dir.join("py"), "greeter", "cobol", "action", None).is_err());
    }
}
