//! `flowhost plugin new` and `flowhost plugin build`: a plugin project in Rust, Python or JavaScript from templates
//! carried in the binary (`host/bin/templates/`), and its build into a component with the registries' toolchains
//! only (cargo and the `wasm32-wasip2` target; componentize-py from PyPI; componentize-js from npm).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// One file of a template: where it goes in the project, and its text with the placeholders [`fill`] replaces.
struct TemplateFile {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

/// A template file carried in the binary: `file!("rust/Cargo.toml.tmpl" => "Cargo.toml")`; the names may be
/// `concat!`s.
macro_rules! file {
    ($template:expr => $path:expr) => {
        TemplateFile { path: $path, text: include_str!(concat!("../templates/", $template)), executable: false }
    };
    ($template:expr => $path:expr, executable) => {
        TemplateFile { path: $path, text: include_str!(concat!("../templates/", $template)), executable: true }
    };
}

/// The host's WIT (`flowhost:plugin@0.2.0`), which the projects that bind their world themselves (Python,
/// JavaScript, a Rust projector) build against, as carried in this binary: written verbatim (no placeholders).
const HOST_WIT: TemplateFile = TemplateFile {
    path: "wit/deps/flowhost-plugin-0.2.0/plugin.wit",
    text: include_str!("../../../wit/flowhost-plugin-0.2.0/plugin.wit"),
    executable: false,
};

/// A guest language: the files every project has, whatever its world, the words its README uses, and its worlds.
struct Language {
    name: &'static str,
    /// The language as the README names it.
    title: &'static str,
    /// The README's command for the unit tests.
    unit_tests: &'static str,
    /// Where the build writes the component.
    component: &'static str,
    /// Where the README says the version is.
    version_at: &'static str,
    /// The README's paragraph on the toolchain.
    toolchain: &'static str,
    common: &'static [TemplateFile],
    worlds: &'static [World],
}

/// What a project of one world is: its own files and the words its README uses.
struct World {
    name: &'static str,
    words: Words,
    files: &'static [TemplateFile],
}

/// The README's words on one world, the same in every language.
struct Words {
    /// What the plugin does.
    what: &'static str,
    /// What `plugin test` takes besides the component: the action and its input, or a projector's record and
    /// state.
    test_args: &'static str,
    /// How it is used (in a flow, in Studio).
    studio: &'static str,
}

const ACTION: Words = Words {
    what: "Its one action, `greet`, turns its configuration (what a flow author sets on the node, `{{placeholders}}` \
           filled from the event) into a message.",
    test_args: "--action greet --input example-input.json",
    studio: "Then, in Studio, place `greet` in a flow and set `player_id` to `{{player_id}}`.",
};
const SERVICE: Words = Words {
    what: "A service: its action, `tag`, tags a player with a segment, and its data source, `segments`, gives \
           Studio's form the choices.",
    test_args: "--action tag --input example-input.json",
    studio: "Then, in Studio, place `tag` in a flow, set `player_id` to `{{player_id}}` and pick a segment.",
};
const NODE_KIND: Words = Words {
    what: "Its node kind, `__NAME__`, lets an event through when a number field reaches a threshold. Called as an \
           action (as `plugin test` does), its input is `{\"config\": ..., \"event\": ...}`.",
    test_args: "--action __NAME__ --input example-input.json",
    studio: "Then, in Studio, place a `__NAME__` node in a flow and set its field and threshold.",
};
const PROJECTOR: Words = Words {
    what: "A projector: a pure function from a player's stored document and a presence record to the new document. \
           It counts the player's visits per site.",
    test_args: "--input example-input.json --state example-state.json",
    studio: "The presence role runs the active version of the plugin `presence` as its projection: to run yours \
             there, give it that id and keep the contract of docs/presence.md (the validation codes, the document \
             the presence routes read). Under any other id it is stored and tested, and runs nowhere.",
};

/// The example inputs and guest-side worlds every language shares.
const ACTION_INPUT: TemplateFile = file!("action-input.json.tmpl" => "example-input.json");
const SERVICE_INPUT: TemplateFile = file!("service-input.json.tmpl" => "example-input.json");
const NODE_KIND_INPUT: TemplateFile = file!("node-kind-input.json.tmpl" => "example-input.json");
const PROJECTOR_INPUT: TemplateFile = file!("projector-input.json.tmpl" => "example-input.json");
const PROJECTOR_STATE: TemplateFile = file!("projector-state.json.tmpl" => "example-state.json");
const PROJECTOR_WIT: TemplateFile = file!("wit/projector.wit.tmpl" => "wit/world.wit");
const RUST_CARGO: TemplateFile = file!("rust/Cargo.toml.tmpl" => "Cargo.toml");

/// The worlds of a language that binds its world itself (Python, JavaScript), by the same layout in each: the
/// plugin's own module (`plugin`, `projection` for a projector) and its tests, the component's side (`app`), the
/// example and the guest-side world.
macro_rules! interpreted_worlds {
    ($lang:literal, $ext:literal, $plugin_test:literal, $projection_test:literal) => {
        &[
            interpreted_worlds!(@world $lang, $ext, "action", ACTION, "plugin", $plugin_test, [ACTION_INPUT]),
            interpreted_worlds!(@world $lang, $ext, "service", SERVICE, "plugin", $plugin_test, [SERVICE_INPUT]),
            interpreted_worlds!(@world $lang, $ext, "node-kind", NODE_KIND, "plugin", $plugin_test, [NODE_KIND_INPUT]),
            interpreted_worlds!(@world $lang, $ext, "projector", PROJECTOR, "projection", $projection_test,
                [PROJECTOR_INPUT, PROJECTOR_STATE]),
        ]
    };
    (@world $lang:literal, $ext:literal, $world:literal, $words:expr, $module:literal, $test:literal, [$($example:expr),+]) => {
        World {
            name: $world,
            words: $words,
            files: &[
                file!(concat!($lang, "/", $world, "/", $module, ".", $ext, ".tmpl") => concat!($module, ".", $ext)),
                file!(concat!($lang, "/", $world, "/app.", $ext, ".tmpl") => concat!("app.", $ext)),
                file!(concat!($lang, "/", $world, "/", $test, ".tmpl") => $test),
                file!(concat!("wit/", $world, ".wit.tmpl") => "wit/world.wit"),
                $($example),+
            ],
        }
    };
}

/// The guest languages `plugin new --lang` knows.
const LANGUAGES: &[Language] = &[
    Language {
        name: "rust",
        title: "Rust",
        unit_tests: "cargo test",
        component: "target/wasm32-wasip2/release/__CRATE__.wasm",
        version_at: "`Cargo.toml`",
        toolchain: "The build needs cargo and the `wasm32-wasip2` target (added with rustup when missing). The \
                    component is a few hundred kilobytes.",
        common: &[
            file!("rust/build.sh.tmpl" => "build.sh", executable),
            file!("README.md.tmpl" => "README.md"),
            file!("rust/gitignore.tmpl" => ".gitignore"),
        ],
        worlds: &[
            World {
                name: "action",
                words: ACTION,
                files: &[RUST_CARGO, file!("rust/action/lib.rs.tmpl" => "src/lib.rs"), ACTION_INPUT],
            },
            World {
                name: "service",
                words: SERVICE,
                files: &[RUST_CARGO, file!("rust/service/lib.rs.tmpl" => "src/lib.rs"), SERVICE_INPUT],
            },
            World {
                name: "node-kind",
                words: NODE_KIND,
                files: &[RUST_CARGO, file!("rust/node-kind/lib.rs.tmpl" => "src/lib.rs"), NODE_KIND_INPUT],
            },
            World {
                name: "projector",
                words: PROJECTOR,
                // No SDK: the SDK builds the plugin world, so a projector binds its own world with wit-bindgen.
                files: &[
                    file!("rust/projector/Cargo.toml.tmpl" => "Cargo.toml"),
                    file!("rust/projector/lib.rs.tmpl" => "src/lib.rs"),
                    PROJECTOR_INPUT,
                    PROJECTOR_STATE,
                    PROJECTOR_WIT,
                    HOST_WIT,
                ],
            },
        ],
    },
    Language {
        name: "python",
        title: "Python",
        unit_tests: "python3 -m unittest",
        component: "build/__NAME__.wasm",
        version_at: "`plugin.py` (a projector's in `projection.py`)",
        toolchain: "The first build installs componentize-py from PyPI into `.venv` (`build-requirements.txt`). The \
                    component embeds the Python interpreter, initialized: about 18 MB, so a Flowhost that loads it \
                    needs `plugins.max_component_bytes` of at least 20 MiB (the default). It compiles once, in \
                    about 20 s; each call then instantiates it in about 2 ms.",
        common: &[
            file!("python/build.sh.tmpl" => "build.sh", executable),
            file!("python/build-requirements.txt.tmpl" => "build-requirements.txt"),
            file!("README.md.tmpl" => "README.md"),
            file!("python/gitignore.tmpl" => ".gitignore"),
            HOST_WIT,
        ],
        worlds: interpreted_worlds!("python", "py", "test_plugin.py", "test_projection.py"),
    },
    Language {
        name: "js",
        title: "JavaScript",
        unit_tests: "npm test",
        component: "build/__NAME__.wasm",
        version_at: "`plugin.js` (a projector's in `projection.js`)",
        toolchain: "The first build installs componentize-js from npm into `node_modules` (`package.json`). The \
                    component embeds a JavaScript engine (StarlingMonkey), initialized: about 12 MB. It compiles \
                    once, in about 20 s; each call then instantiates it in under a millisecond.",
        common: &[
            file!("js/package.json.tmpl" => "package.json"),
            file!("js/build.sh.tmpl" => "build.sh", executable),
            file!("README.md.tmpl" => "README.md"),
            file!("js/gitignore.tmpl" => ".gitignore"),
            HOST_WIT,
        ],
        worlds: interpreted_worlds!("js", "js", "plugin.test.js", "projection.test.js"),
    },
];

/// The languages `plugin new --lang` knows, as its errors list them.
pub const LANGS: &str = "rust, python, js";

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

/// Writes a new plugin project `name` in `lang` into `dir` (which must not exist yet, or be empty): the manifest
/// with one action (or node kind) and its `config_schema`, unit tests, an example input, a build script and a
/// README. `sdk` is the Rust SDK dependency as Cargo.toml writes it (default: this binary's SDK). Answers the files
/// written.
pub fn new_project(dir: &Path, name: &str, lang: &str, world: &str, sdk: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    check_name(name)?;
    let Some(language) = LANGUAGES.iter().find(|known| known.name == lang) else {
        bail!("no template for {lang:?} (known: {LANGS})");
    };
    let Some(world) = language.worlds.iter().find(|known| known.name == world) else {
        let known: Vec<&str> = language.worlds.iter().map(|known| known.name).collect();
        bail!("no {} template for the {world:?} world (known: {})", language.title, known.join(", "));
    };
    if dir.exists() && dir.read_dir().with_context(|| format!("reading {}", dir.display()))?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let sdk = match (sdk, language.name) {
        (Some(sdk), "rust") => sdk.to_owned(),
        (None, "rust") => default_sdk()?,
        (None, _) => String::new(),
        (Some(_), _) => bail!("--sdk names the Rust SDK: a {} project has no SDK dependency", language.title),
    };
    let fill = |text: &str| {
        text.replace("__TOOLCHAIN__", language.toolchain)
            .replace("__COMPONENT__", language.component)
            .replace("__UNIT_TESTS__", language.unit_tests)
            .replace("__VERSION_AT__", language.version_at)
            .replace("__LANGUAGE__", language.title)
            .replace("__WHAT__", world.words.what)
            .replace("__STUDIO__", world.words.studio)
            .replace("__TEST_ARGS__", world.words.test_args)
            .replace("__WORLD__", world.name)
            .replace("__NAME__", name)
            .replace("__CRATE__", &name.replace('-', "_"))
            .replace("__TYPE__", &type_name(name))
            .replace("__SDK__", &sdk)
    };
    let mut written = Vec::new();
    for file in language.common.iter().chain(world.files) {
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

/// Builds the plugin project in `dir` into a component; answers the component's path. A Rust project (it has a
/// `Cargo.toml`) builds with cargo into `target_dir` (default `dir/target`); a Python or JavaScript one runs its
/// `build.sh`, which installs its toolchain from the registry on the first build (the steps are the project's
/// own, for the author to read and change). The progress goes to standard error as it comes.
pub fn build_project(dir: &Path, target_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    if dir.join("Cargo.toml").is_file() {
        return build_rust(dir, target_dir);
    }
    let script = dir.join("build.sh");
    if !script.is_file() {
        bail!("{} is not a plugin project: it has neither a Cargo.toml nor a build.sh", dir.display());
    }
    if target_dir.is_some() {
        bail!("--target-dir is cargo's: {} is not a Rust project", dir.display());
    }
    let output = Command::new("bash")
        .arg(&script)
        .current_dir(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed ({})", script.display(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(component) = stdout.lines().map(str::trim).rfind(|line| !line.is_empty()) else {
        bail!("{} printed no component path", script.display());
    };
    let component = dir.join(component);
    if !component.is_file() {
        bail!("{} built no component at {}", script.display(), component.display());
    }
    Ok(component)
}

/// Builds a Rust project with cargo for `wasm32-wasip2` (adding the target with rustup when the toolchain lacks
/// it), into `target_dir` (default `dir/target`).
fn build_rust(dir: &Path, target_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
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

    /// A placeholder left in `text`: `__` and capitals up to the next `__` (Python's `__init__` is not one).
    fn placeholder(text: &str) -> Option<&str> {
        text.match_indices("__").find_map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest.find("__")?;
            let word = &rest[..end];
            (!word.is_empty() && word.chars().all(|c| c.is_ascii_uppercase())).then_some(word)
        })
    }

    #[test]
    fn a_project_is_every_template_file_filled() {
        let dir = std::env::temp_dir().join(format!("flowhost-scaffold-{}", std::process::id()));
        for language in LANGUAGES {
            let sdk = (language.name == "rust").then_some("{ path = \"/sdk\" }");
            for world in language.worlds {
                let _ = std::fs::remove_dir_all(&dir);
                let written = new_project(&dir, "greeter-two", language.name, world.name, sdk).unwrap();
                assert_eq!(written.len(), language.common.len() + world.files.len());
                for path in &written {
                    let text = std::fs::read_to_string(path).unwrap();
                    let left = placeholder(&text);
                    assert!(
                        left.is_none(),
                        "{} of {}/{}: {left:?} is not filled",
                        path.display(),
                        language.name,
                        world.name
                    );
                }
                let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
                assert!(readme.contains(&format!("A Flowhost plugin in {}", language.title)), "{readme}");
                let example = std::fs::read_to_string(dir.join("example-input.json")).unwrap();
                assert!(serde_json::from_str::<serde_json::Value>(&example).is_ok(), "{example}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        new_project(&dir, "greeter-two", "rust", "action", Some("{ path = \"/sdk\" }")).unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct GreeterTwoPlugin;") && lib.contains("Manifest::new(\"greeter-two\""), "{lib}");
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("flowhost-sdk-guest = { path = \"/sdk\" }"), "{cargo}");
        // Never over an author's files.
        assert!(new_project(&dir, "greeter-two", "rust", "action", None).is_err());
        let _ = std::fs::remove_dir_all(&dir);

        new_project(&dir, "greeter-two", "python", "action", None).unwrap();
        let wit = std::fs::read_to_string(dir.join("wit/deps/flowhost-plugin-0.2.0/plugin.wit")).unwrap();
        assert_eq!(wit, HOST_WIT.text, "the host's WIT, verbatim");
        let plugin = std::fs::read_to_string(dir.join("plugin.py")).unwrap();
        assert!(plugin.contains("\"id\": \"greeter-two\"") && plugin.contains("super().__init__"), "{plugin}");
        let _ = std::fs::remove_dir_all(&dir);

        let unknown = new_project(&dir, "greeter", "python", "flow", None).unwrap_err().to_string();
        assert!(unknown.contains("(known: action, service, node-kind, projector)"), "{unknown}");
        let unknown = new_project(&dir, "greeter", "cobol", "action", None).unwrap_err().to_string();
        assert!(unknown.contains(LANGS), "{unknown}");
        assert!(new_project(&dir, "greeter", "js", "action", Some("{ path = \"/sdk\" }")).is_err(), "no SDK in JS");
        assert!(!dir.exists(), "nothing written for a refused project");
    }
}
