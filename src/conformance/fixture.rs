//! Fixtures: the volume request a run starts from, as JSON or as a Nomad volume
//! spec in HCL exactly as users give it to `nomad volume create`.
//!
//! JSON: `{"name", "namespace", "node_pool", "capacity_min", "capacity_max",
//! "parameters"}`; capacities are bytes (numbers) or sizes (`"10GiB"`). HCL: the
//! volume spec's `name`, `namespace`, `node_pool`, `type = "host"`, `plugin_id`,
//! `capacity_min`/`capacity_max` (`"10GiB"` style) and a `parameters { }` block;
//! other blocks (`capability`, `constraint`) are accepted and ignored.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::context::RequestTemplate;
use crate::contract::Parameters;

/// A fixture could not be used. Every message names the file (and the line
/// where the parser knows it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// The file could not be read.
    #[error("cannot read fixture {}: {source}", path.display())]
    Read {
        /// The fixture.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON / HCL.
    #[error("fixture {}: {message}", path.display())]
    Syntax {
        /// The fixture.
        path: PathBuf,
        /// The parser's words, with the line.
        message: String,
    },
    /// A field has the wrong type or value.
    #[error("fixture {}: {message}", path.display())]
    Invalid {
        /// The fixture.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a fixture sets; the rest stays at the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fixture {
    /// The request template to run with.
    pub template: RequestTemplate,
    /// `plugin_id` from an HCL spec, informational.
    pub plugin_id: Option<String>,
}

/// Reads a fixture; `.hcl` files (or content that is not JSON) are parsed as HCL.
pub fn load(path: &Path) -> Result<Fixture, FixtureError> {
    let text =
        crate::safe_fs::read_text_bounded(path, MAX_FIXTURE_BYTES, crate::safe_fs::Links::Follow)
            .map_err(|e| FixtureError::Read {
            path: path.to_path_buf(),
            source: e.into_io(),
        })?;
    let is_hcl = path.extension().is_some_and(|e| e == "hcl" || e == "nomad");
    if is_hcl {
        parse_hcl(path, &text)
    } else {
        parse_json(path, &text)
    }
}

/// Parses the JSON form.
pub fn parse_json(path: &Path, text: &str) -> Result<Fixture, FixtureError> {
    let value: Value = serde_json::from_str(text).map_err(|e| FixtureError::Syntax {
        path: path.to_path_buf(),
        message: format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ),
    })?;
    let Value::Object(map) = value else {
        return Err(invalid(path, "expected a JSON object"));
    };
    let mut fx = Fixture::default();
    for (key, value) in map {
        apply(path, &mut fx, &key, Field::from_json(value))?;
    }
    Ok(fx)
}

/// Parses the HCL volume-spec form.
///
/// The HCL parser, its conversions and the drop of what it built recurse
/// once per level of nesting, and nesting hides where a bracket count does
/// not look (`${[[[…]]]}` inside a string, `!!!…true`, `1 + 1 + …`). So the
/// text is bounded in size, the parse runs on a thread of its own with a
/// generous stack (`HCL_STACK`, enough for the largest text allowed), and
/// the depth of what was parsed is bounded afterwards: any fixture gives a
/// spec or one clear error, never a crash.
pub fn parse_hcl(path: &Path, text: &str) -> Result<Fixture, FixtureError> {
    if text.len() > MAX_HCL_BYTES {
        return Err(FixtureError::Syntax {
            path: path.to_path_buf(),
            message: format!(
                "invalid HCL: {} bytes, more than a volume spec can need ({MAX_HCL_BYTES})",
                text.len()
            ),
        });
    }
    let (owned_path, owned_text) = (path.to_path_buf(), text.to_string());
    let parser = std::thread::Builder::new()
        .name("hcl-fixture".into())
        .stack_size(HCL_STACK)
        .spawn(move || parse_hcl_here(&owned_path, &owned_text));
    let failed = |what: &str| FixtureError::Syntax {
        path: path.to_path_buf(),
        message: format!("invalid HCL: {what}"),
    };
    match parser {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|_| Err(failed("the parser gave up on it"))),
        Err(e) => Err(failed(&format!("cannot start the parser: {e}"))),
    }
}

/// The most read from a fixture file (a regular file only, or a symlink to
/// one): a volume request is a few hundred bytes, and its environment must
/// fit the kernel's limit for a whole command line anyway.
pub const MAX_FIXTURE_BYTES: u64 = 1 << 20;

/// The largest HCL fixture accepted: a volume spec is a few hundred bytes.
const MAX_HCL_BYTES: usize = 32 << 10;

/// The HCL parser thread's stack: the deepest nesting [`MAX_HCL_BYTES`] of
/// text can express took at most 280 MB of it in a debug build (measured;
/// `hostile_hcl_at_the_size_limit_is_an_input_error` in tests/it/robustness.rs
/// keeps it so). Pages are only used as the parser goes deep.
const HCL_STACK: usize = 512 << 20;

fn parse_hcl_here(path: &Path, text: &str) -> Result<Fixture, FixtureError> {
    // Cheap first: brackets nested absurdly deep fail before the parser runs.
    if let Some(line) = too_deep(text, MAX_HCL_NESTING) {
        return Err(FixtureError::Syntax {
            path: path.to_path_buf(),
            message: format!(
                "invalid HCL at line {line}: nested more than {MAX_HCL_NESTING} levels deep"
            ),
        });
    }
    let body: hcl::Body = hcl::from_str(text).map_err(|e| FixtureError::Syntax {
        path: path.to_path_buf(),
        message: match &e {
            // The parser's own text is a multi-line code frame; a CLI error is one line.
            hcl::Error::Parse(parse) => format!(
                "invalid HCL at line {} column {}: {}",
                parse.location().line(),
                parse.location().column(),
                parse.message()
            ),
            other => format!("invalid HCL: {other}"),
        },
    })?;
    if deepest(&body) > MAX_HCL_NESTING {
        return Err(FixtureError::Syntax {
            path: path.to_path_buf(),
            message: format!(
                "invalid HCL: expressions nested more than {MAX_HCL_NESTING} levels deep"
            ),
        });
    }
    let mut fx = Fixture::default();
    for attr in body.attributes() {
        let mut field = Field::from_hcl(attr.expr());
        if attr.key() == "parameters" {
            field = field.weakly_decoded();
        }
        apply(path, &mut fx, attr.key(), field)?;
    }
    for block in body.blocks() {
        if block.identifier() == "parameters" {
            let mut params = Parameters::new();
            for attr in block.body().attributes() {
                match Field::from_hcl(attr.expr()).weakly_decoded() {
                    Field::Text(s) => {
                        params.insert(attr.key().to_string(), s);
                    }
                    _ => {
                        return Err(invalid(
                            path,
                            &format!(
                                "parameters.{}: parameter values must be strings",
                                attr.key()
                            ),
                        ));
                    }
                }
            }
            fx.template.parameters = Some(params);
        }
    }
    Ok(fx)
}

/// How deep blocks and expressions nest in `body`, counted without
/// recursion (a deep tree is what this guards against).
fn deepest(body: &hcl::Body) -> usize {
    use hcl::{Expression as E, ObjectKey, Structure, TraversalOperator};
    enum Node<'a> {
        Body(&'a hcl::Body),
        Expr(&'a E),
    }
    let mut stack = vec![(Node::Body(body), 0usize)];
    let mut max = 0;
    while let Some((node, depth)) = stack.pop() {
        max = max.max(depth);
        let children: Vec<Node<'_>> = match node {
            Node::Body(b) => b
                .iter()
                .map(|s| match s {
                    Structure::Attribute(a) => Node::Expr(a.expr()),
                    Structure::Block(b) => Node::Body(b.body()),
                })
                .collect(),
            Node::Expr(e) => match e {
                E::Array(items) => items.iter().map(Node::Expr).collect(),
                E::Object(o) => o
                    .iter()
                    .flat_map(|(k, v)| {
                        let key = match k {
                            ObjectKey::Expression(k) => Some(Node::Expr(k)),
                            _ => None,
                        };
                        key.into_iter().chain([Node::Expr(v)])
                    })
                    .collect(),
                E::Traversal(t) => std::iter::once(Node::Expr(&t.expr))
                    .chain(t.operators.iter().filter_map(|op| match op {
                        TraversalOperator::Index(i) => Some(Node::Expr(i)),
                        _ => None,
                    }))
                    .collect(),
                E::FuncCall(f) => f.args.iter().map(Node::Expr).collect(),
                E::Parenthesis(inner) => vec![Node::Expr(inner)],
                E::Conditional(c) => [&c.cond_expr, &c.true_expr, &c.false_expr]
                    .into_iter()
                    .map(Node::Expr)
                    .collect(),
                E::Operation(op) => match &**op {
                    hcl::Operation::Unary(u) => vec![Node::Expr(&u.expr)],
                    hcl::Operation::Binary(b) => {
                        vec![Node::Expr(&b.lhs_expr), Node::Expr(&b.rhs_expr)]
                    }
                },
                E::ForExpr(f) => [
                    Some(&f.collection_expr),
                    f.key_expr.as_ref(),
                    Some(&f.value_expr),
                    f.cond_expr.as_ref(),
                ]
                .into_iter()
                .flatten()
                .map(Node::Expr)
                .collect(),
                _ => Vec::new(),
            },
        };
        stack.extend(children.into_iter().map(|c| (c, depth + 1)));
    }
    max
}

/// How deep brackets may nest in an HCL fixture.
const MAX_HCL_NESTING: usize = 64;

/// The line where `{`, `[` or `(` first nest deeper than `limit` (outside
/// string literals and comments), if they do.
fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => {
                            line += 1;
                            break;
                        }
                        _ => {}
                    }
                }
            }
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '{' | '[' | '(' => {
                depth += 1;
                if depth > limit {
                    return Some(line);
                }
            }
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A boolean as a weak decode into a string renders it.
fn weak_bool(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// A fixture value, from either syntax.
enum Field {
    Null,
    Text(String),
    Number(i64),
    /// A number that is not an integer, as written.
    Float(String),
    Bool(bool),
    Map(Vec<(String, Field)>),
    Other,
}

impl Field {
    /// Numbers and booleans as the strings Nomad's `volume create` makes of
    /// them: it decodes a spec's parameters weakly (mapstructure's
    /// `WeaklyTypedInput`) into `map[string]string`, so `uid = 1000` reaches
    /// the plugin as `"1000"`, `1.5` as `"1.5"` and `true` as `"1"`.
    fn weakly_decoded(self) -> Field {
        match self {
            Field::Number(n) => Field::Text(n.to_string()),
            Field::Float(f) => Field::Text(f),
            Field::Bool(b) => Field::Text(weak_bool(b).to_string()),
            Field::Map(pairs) => Field::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k, v.weakly_decoded()))
                    .collect(),
            ),
            other => other,
        }
    }

    fn from_json(v: Value) -> Field {
        match v {
            Value::Null => Field::Null,
            Value::String(s) => Field::Text(s),
            Value::Bool(b) => Field::Bool(b),
            Value::Number(n) => n
                .as_i64()
                .map(Field::Number)
                .unwrap_or_else(|| Field::Other),
            Value::Object(m) => Field::Map(
                m.into_iter()
                    .map(|(k, v)| (k, Field::from_json(v)))
                    .collect(),
            ),
            _ => Field::Other,
        }
    }

    fn from_hcl(e: &hcl::Expression) -> Field {
        match e {
            hcl::Expression::Null => Field::Null,
            hcl::Expression::String(s) => Field::Text(s.clone()),
            hcl::Expression::Bool(b) => Field::Bool(*b),
            hcl::Expression::Number(n) => n
                .as_i64()
                .map(Field::Number)
                .unwrap_or_else(|| Field::Float(n.to_string())),
            hcl::Expression::Object(o) => Field::Map(
                o.iter()
                    .map(|(k, v)| {
                        (
                            k.to_string().trim_matches('"').to_string(),
                            Field::from_hcl(v),
                        )
                    })
                    .collect(),
            ),
            _ => Field::Other,
        }
    }
}

fn invalid(path: &Path, message: &str) -> FixtureError {
    FixtureError::Invalid {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn apply(path: &Path, fx: &mut Fixture, key: &str, value: Field) -> Result<(), FixtureError> {
    let text = |v: Field| match v {
        Field::Text(s) => Ok(s),
        _ => Err(invalid(path, &format!("{key}: expected a string"))),
    };
    let t = &mut fx.template;
    match key {
        "name" => t.name = Some(text(value)?),
        "namespace" => t.namespace = text(value)?,
        "node_pool" => t.node_pool = text(value)?,
        "plugin_id" => fx.plugin_id = Some(text(value)?),
        "type" => {
            let kind = text(value)?;
            if kind != "host" {
                return Err(invalid(
                    path,
                    &format!("type: expected \"host\" (a dynamic host volume), got {kind:?}"),
                ));
            }
        }
        "capacity_min" | "capacity_max" => {
            let bytes = match value {
                Field::Number(n) if n >= 0 => n,
                Field::Text(s) => {
                    parse_size(&s).map_err(|e| invalid(path, &format!("{key}: {e}")))?
                }
                _ => {
                    return Err(invalid(
                        path,
                        &format!("{key}: expected bytes or a size such as \"10GiB\""),
                    ));
                }
            };
            if key == "capacity_min" {
                t.capacity_min = bytes;
            } else {
                t.capacity_max = bytes;
            }
        }
        "parameters" => {
            t.parameters = match value {
                Field::Null => None,
                Field::Map(pairs) => Some(
                    pairs
                        .into_iter()
                        .map(|(k, v)| match v {
                            Field::Text(s) => Ok((k, s)),
                            _ => Err(invalid(
                                path,
                                &format!("parameters.{k}: parameter values must be strings"),
                            )),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                _ => return Err(invalid(path, "parameters: expected an object of strings")),
            }
        }
        // Parts of a volume spec that do not reach the plugin.
        "id" | "node_id" | "capability" | "constraint" | "capacity" => {}
        other => return Err(invalid(path, &format!("unknown field {other:?}"))),
    }
    Ok(())
}

/// Parses a size as Nomad's volume specs write it: `10GiB`, `10 GB`, `512MiB`,
/// `1.5GB`, `1000` (bytes). SI units are powers of 1000, IEC units of 1024.
pub fn parse_size(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = (s[..split].trim(), s[split..].trim().to_ascii_lowercase());
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. \"10GiB\")"))?;
    let scale: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" | "ki" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" | "mi" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" | "gi" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" | "ti" => 1024f64.powi(4),
        "p" | "pb" => 1e15,
        "pib" | "pi" => 1024f64.powi(5),
        _ => return Err(format!("unknown size unit {unit:?} in {s:?}")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes > i64::MAX as f64 {
        return Err(format!("size {s:?} is too large"));
    }
    Ok(bytes.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_nomad() {
        for (s, want) in [
            ("10GiB", 10 << 30),
            ("10 GB", 10_000_000_000),
            ("512MiB", 512 << 20),
            ("1.5GB", 1_500_000_000),
            ("1000", 1000),
            ("20mib", 20 << 20),
        ] {
            assert_eq!(parse_size(s).unwrap(), want, "{s}");
        }
        for bad in ["", "GiB", "10 parsecs", "-1GB", "99999999999PiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hcl_volume_spec_sets_the_request() {
        let spec = r#"
name      = "database"
namespace = "prod"
type      = "host"
plugin_id = "my-plugin"
capacity_min = "10GiB"
capacity_max = "20GiB"
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
parameters {
  fs = "ext4"
  size_hint = "large"
}
"#;
        let fx = parse_hcl(Path::new("v.hcl"), spec).unwrap();
        assert_eq!(fx.template.name.as_deref(), Some("database"));
        assert_eq!(fx.template.namespace, "prod");
        assert_eq!(fx.template.capacity_min, 10 << 30);
        assert_eq!(fx.template.capacity_max, 20 << 30);
        assert_eq!(fx.plugin_id.as_deref(), Some("my-plugin"));
        let p = fx.template.parameters.unwrap();
        assert_eq!(p.get("fs").map(String::as_str), Some("ext4"));
    }

    /// Nomad decodes a volume spec's parameters weakly into strings.
    #[test]
    fn hcl_number_and_bool_parameters_pass_as_nomad_passes_them() {
        for spec in [
            "parameters {\n  uid = 1000\n  ratio = 1.5\n  fast = true\n  slow = false\n}\n",
            "parameters = { uid = 1000, ratio = 1.5, fast = true, slow = false }\n",
        ] {
            let fx = parse_hcl(Path::new("v.hcl"), spec).unwrap();
            let p = fx.template.parameters.unwrap();
            let got: Vec<(&str, &str)> = p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(
                got,
                [
                    ("fast", "1"),
                    ("ratio", "1.5"),
                    ("slow", "0"),
                    ("uid", "1000")
                ],
                "{spec}"
            );
        }
        // JSON fixtures say what they mean: strings only.
        assert!(parse_json(Path::new("f.json"), r#"{"parameters": {"uid": 1000}}"#).is_err());
    }

    #[test]
    fn json_fixture_and_errors_name_the_file() {
        let fx = parse_json(
            Path::new("f.json"),
            r#"{"name": "n", "capacity_min": 1048576, "capacity_max": "2MiB", "parameters": {"a": "b"}}"#,
        )
        .unwrap();
        assert_eq!(
            (fx.template.capacity_min, fx.template.capacity_max),
            (1 << 20, 2 << 20)
        );
        let err = parse_json(Path::new("f.json"), "{\n  \"name\": }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("f.json") && err.contains("line 2"), "{err}");
        let err = parse_json(Path::new("f.json"), r#"{"parameters": {"a": 1}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("parameters.a"), "{err}");
        let err = parse_hcl(Path::new("v.hcl"), "name = \n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("v.hcl"), "{err}");
        let err = parse_hcl(Path::new("v.hcl"), "type = \"csi\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("host"), "{err}");
    }
}
