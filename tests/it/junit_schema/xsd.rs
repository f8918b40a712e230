//! A small validator of XML against the JUnit XSD the CI systems read: enough
//! of XML Schema (sequences, choices, occurrences, simple types) to hold a
//! report to it.

use super::*;

pub(super) fn element(e: &BytesStart<'_>) -> Node {
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    let attrs = e
        .attributes()
        .map(|a| {
            let a = a.expect("well-formed attribute");
            (
                String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                String::from_utf8_lossy(&a.value).into_owned(),
            )
        })
        .collect();
    Node {
        name,
        attrs,
        ..Node::default()
    }
}

/// Parses a whole document; panics on anything that is not well-formed XML.
pub(super) fn parse(xml: &str) -> Node {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Node::default()];
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(element(&e)),
            Event::End(_) => {
                let done = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(done);
            }
            Event::Text(t) => stack
                .last_mut()
                .unwrap()
                .text
                .push_str(&String::from_utf8_lossy(t.as_ref())),
            Event::CData(t) => stack
                .last_mut()
                .unwrap()
                .text
                .push_str(&String::from_utf8_lossy(t.as_ref())),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "unclosed elements");
    stack
        .pop()
        .unwrap()
        .children
        .into_iter()
        .next()
        .expect("a root element")
}

pub(super) fn bound(node: &Node, key: &str) -> usize {
    match node.attr(key) {
        None => 1,
        Some("unbounded") => usize::MAX,
        Some(n) => n.parse().expect("occurrence bound"),
    }
}

pub(super) fn particle(node: &Node) -> Particle {
    match node.name.as_str() {
        "xs:element" => Particle::Element {
            name: node.attr("ref").expect("element ref").to_owned(),
            min: bound(node, "minOccurs"),
            max: bound(node, "maxOccurs"),
        },
        "xs:sequence" => Particle::Sequence(node.children.iter().map(particle).collect()),
        "xs:choice" => Particle::Choice {
            of: node.children.iter().map(particle).collect(),
            min: bound(node, "minOccurs"),
            max: bound(node, "maxOccurs"),
        },
        other => panic!("schema uses {other}, which this test does not understand"),
    }
}

pub(super) fn load_schema(path: &Path) -> HashMap<String, Decl> {
    let schema = parse(&std::fs::read_to_string(path).unwrap());
    assert_eq!(schema.name, "xs:schema");
    let mut decls = HashMap::new();
    for el in &schema.children {
        let name = el.attr("name").expect("top-level element name").to_owned();
        let ty = el
            .children
            .iter()
            .find(|c| c.name == "xs:complexType")
            .expect("complexType");
        let mut decl = Decl {
            attrs: Vec::new(),
            mixed: ty.attr("mixed") == Some("true"),
            content: None,
        };
        for c in &ty.children {
            match c.name.as_str() {
                "xs:attribute" => decl.attrs.push((
                    c.attr("name").unwrap().to_owned(),
                    c.attr("type").unwrap().to_owned(),
                    c.attr("use") == Some("required"),
                )),
                _ => decl.content = Some(particle(c)),
            }
        }
        decls.insert(name, decl);
    }
    decls
}

/// Matches `particle` against `names[at..]`, greedily; returns the new position.
pub(super) fn consume(p: &Particle, names: &[&str], mut at: usize) -> Result<usize, String> {
    match p {
        Particle::Element { name, min, max } => {
            let mut n = 0;
            while n < *max && names.get(at) == Some(&name.as_str()) {
                at += 1;
                n += 1;
            }
            if n < *min {
                return Err(format!(
                    "expected <{name}> at child {at}, found {:?}",
                    names.get(at)
                ));
            }
            Ok(at)
        }
        Particle::Sequence(items) => items.iter().try_fold(at, |at, p| consume(p, names, at)),
        Particle::Choice { of, min, max } => {
            let mut n = 0;
            while n < *max {
                let Some(next) = of
                    .iter()
                    .find_map(|p| consume(p, names, at).ok().filter(|&e| e > at))
                else {
                    break;
                };
                at = next;
                n += 1;
            }
            if n < *min {
                return Err(format!("expected one of a choice at child {at}"));
            }
            Ok(at)
        }
    }
}

pub(super) fn type_ok(ty: &str, value: &str) -> bool {
    match ty {
        "xs:string" => true,
        "xs:int" => value.parse::<i32>().is_ok(),
        "xs:decimal" => {
            !value.is_empty()
                && value.trim_start_matches('-').split('.').count() <= 2
                && value
                    .trim_start_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.')
        }
        "xs:dateTime" => regex_like_datetime(value),
        other => panic!("schema type {other} not understood"),
    }
}

/// `YYYY-MM-DDThh:mm:ss[.fff][Z|±hh:mm]`.
pub(super) fn regex_like_datetime(v: &str) -> bool {
    let b = v.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    b.len() >= 19
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
}

pub(super) fn validate(node: &Node, decls: &HashMap<String, Decl>, path: &str) -> Vec<String> {
    let here = format!("{path}/{}", node.name);
    let Some(decl) = decls.get(&node.name) else {
        return vec![format!("{here}: element not in the schema")];
    };
    let mut errors = Vec::new();
    for (name, value) in &node.attrs {
        match decl.attrs.iter().find(|(n, _, _)| n == name) {
            None => errors.push(format!("{here}: attribute {name} not in the schema")),
            Some((_, ty, _)) if !type_ok(ty, value) => {
                errors.push(format!("{here}: {name}={value:?} is not {ty}"))
            }
            Some(_) => {}
        }
    }
    for (name, _, required) in &decl.attrs {
        if *required && node.attr(name).is_none() {
            errors.push(format!("{here}: required attribute {name} missing"));
        }
    }
    if !decl.mixed && !node.text.trim().is_empty() {
        errors.push(format!("{here}: text where the schema allows none"));
    }
    let names: Vec<&str> = node.children.iter().map(|c| c.name.as_str()).collect();
    let end = match &decl.content {
        Some(p) => consume(p, &names, 0).unwrap_or_else(|e| {
            errors.push(format!("{here}: {e}"));
            names.len()
        }),
        None => 0,
    };
    if end < names.len() {
        errors.push(format!("{here}: unexpected <{}>", names[end]));
    }
    for child in &node.children {
        errors.extend(validate(child, decls, &here));
    }
    errors
}
