//! Unit tests of the einsum spec grammar, its errors, resolution (checked against numpy's
//! behaviour, recorded by hand from numpy 2.4) and the serde form.

use super::*;

fn p(s: &str) -> Result<EinsumSpec, SpecError> {
    EinsumSpec::parse(s)
}

fn r(s: &str, shapes: &[&[usize]]) -> Result<String, SpecError> {
    p(s)?.resolve(shapes).map(|r| r.to_string())
}

#[test]
fn parses_and_displays() {
    let s = p(" ab c , bcd -> a d ").unwrap();
    assert_eq!(s.to_string(), "abc,bcd->ad");
    assert_eq!(p(&s.to_string()).unwrap(), s);
    assert_eq!(s.num_inputs(), 2);
    assert!(s.has_explicit_output() && !s.has_ellipsis());
    assert_eq!(p("ij,ij->").unwrap().to_string(), "ij,ij->");
    assert_eq!(p(",i->i").unwrap().to_string(), ",i->i");
    assert_eq!(p("->").unwrap().num_inputs(), 1);
    let e = p("i...j , ...->...").unwrap();
    assert_eq!(e.to_string(), "i...j,...->...");
    assert!(e.has_ellipsis());
    let implicit = p("ij,jk").unwrap();
    assert!(!implicit.has_explicit_output());
    assert_eq!(implicit.to_string(), "ij,jk");
    assert_eq!(p("ii").unwrap().num_inputs(), 1);
    for text in [
        "ii->i",
        "iij,jk->ik",
        "...ij,...jk->...ik",
        "i...,i...->...",
        "a...",
        "...",
    ] {
        let s = p(text).unwrap();
        assert_eq!(s.to_string(), text);
        assert_eq!(text.parse::<EinsumSpec>().unwrap(), s);
        assert_eq!(EinsumSpec::try_from(text).unwrap(), s);
        assert_eq!(EinsumSpec::try_from(text.to_string()).unwrap(), s);
    }
}

#[test]
fn parse_errors() {
    assert_eq!(p("ij,jk->ik->i"), Err(SpecError::MultipleArrows));
    assert_eq!(p("ij->->"), Err(SpecError::MultipleArrows));
    let three = p("ij,jk,kl->il").unwrap_err();
    assert_eq!(three, SpecError::TooManyOperands { count: 3 });
    assert!(three.to_string().contains("at most two"), "{three}");
    assert_eq!(p("i1,jk->ik"), Err(SpecError::InvalidChar { ch: '1', position: 1 }));
    assert_eq!(p("ij,jk->i,k"), Err(SpecError::InvalidChar { ch: ',', position: 8 }));
    assert!(matches!(p("ij,jé->i"), Err(SpecError::InvalidChar { ch: 'é', .. })));
    assert_eq!(p("ij,jk->ik-"), Err(SpecError::InvalidChar { ch: '-', position: 9 }));
    assert_eq!(p("ij,jk- >ik"), Err(SpecError::InvalidChar { ch: '-', position: 5 }));
    assert_eq!(p("ij>k"), Err(SpecError::InvalidChar { ch: '>', position: 2 }));
    assert_eq!(p("i.j"), Err(SpecError::StrayDot { position: 1 }));
    assert_eq!(p("i....j"), Err(SpecError::StrayDot { position: 4 }));
    assert_eq!(p("ij->i.k"), Err(SpecError::StrayDot { position: 5 }));
    assert_eq!(p("...i..."), Err(SpecError::RepeatedEllipsis { position: 4 }));
    assert_eq!(p("ij,jk->iki"), Err(SpecError::RepeatedOutputLabel { label: 'i' }));
    assert_eq!(p("ij->ii"), Err(SpecError::RepeatedOutputLabel { label: 'i' }));
    assert_eq!(p("ij,jk->iz"), Err(SpecError::UnknownOutputLabel { label: 'z' }));
}

#[test]
fn resolves_like_numpy() {
    // Explicit specs without ellipsis stay as written.
    assert_eq!(r("ij,jk->ik", &[&[2, 3], &[3, 4]]).unwrap(), "ij,jk->ik");
    assert_eq!(r("iij,jk->ik", &[&[2, 2, 3], &[3, 4]]).unwrap(), "iij,jk->ik");
    // Implicit output: labels occurring once, sorted by code point (uppercase first).
    assert_eq!(r("ij,jk", &[&[2, 3], &[3, 4]]).unwrap(), "ij,jk->ik");
    assert_eq!(r("aB", &[&[2, 3]]).unwrap(), "aB->Ba");
    assert_eq!(r("bAc", &[&[2, 3, 4]]).unwrap(), "bAc->Abc");
    assert_eq!(r("ii", &[&[3, 3]]).unwrap(), "ii->");
    assert_eq!(r("iij", &[&[2, 2, 3]]).unwrap(), "iij->j");
    assert_eq!(r("iij,jk", &[&[2, 2, 3], &[3, 4]]).unwrap(), "iij,jk->k");
    // Ellipsis: fresh labels from the unused letters, broadcast dims first when implicit.
    assert_eq!(r("...ij", &[&[4, 2, 3]]).unwrap(), "Aij->Aij");
    assert_eq!(r("...ji", &[&[2, 3, 4, 5]]).unwrap(), "ABji->ABij");
    assert_eq!(r("i...->...", &[&[2, 3, 4]]).unwrap(), "iAB->AB");
    assert_eq!(r("ij...->...ji", &[&[2, 3, 4, 5]]).unwrap(), "ijAB->ABji");
    assert_eq!(r("b...a,...", &[&[2, 3, 4, 5], &[4]]).unwrap(), "bABa,B->ABab");
    assert_eq!(r("...a,b", &[&[2, 3, 4], &[5]]).unwrap(), "ABa,b->ABab");
    assert_eq!(r("A...->...A", &[&[3, 2]]).unwrap(), "AB->BA");
    // Ellipsis covering no dimension, also in the output only.
    assert_eq!(r("ij->...ij", &[&[2, 3]]).unwrap(), "ij->ij");
    assert_eq!(r("i...->i", &[&[3]]).unwrap(), "i->i");
    // Right-aligned broadcasting; a size-1 dim against n > 1 is its own summed label.
    assert_eq!(
        r("...ij,...jk", &[&[2, 1, 2, 3], &[5, 3, 4]]).unwrap(),
        "ACij,Bjk->ABik"
    );
    assert_eq!(r("i...,i...->...", &[&[2, 3, 4], &[2, 1]]).unwrap(), "iAB,iC->AB");
    assert_eq!(r("...,...", &[&[2, 1], &[3]]).unwrap(), "AC,B->AB");
    assert_eq!(r("...,...", &[&[1], &[0]]).unwrap(), "B,A->A");
    // Labelled extent-1 dims broadcast as in numpy (renamed to a summed label).
    assert_eq!(r("i,i", &[&[1], &[3]]).unwrap(), "A,i->");
    assert_eq!(r("ij,ij->ij", &[&[2, 1], &[2, 3]]).unwrap(), "iA,ij->ij");
    assert_eq!(r("ii,i->", &[&[1, 1], &[3]]).unwrap(), "AA,i->");
    assert_eq!(r("i,i", &[&[1], &[1]]).unwrap(), "i,i->");
}

#[test]
fn resolution_errors() {
    assert_eq!(
        r("ij,jk", &[&[2, 3]]),
        Err(SpecError::OperandCount { expected: 2, got: 1 })
    );
    assert_eq!(
        r("ijk", &[&[2, 3]]),
        Err(SpecError::RankMismatch {
            operand: 0,
            expected: 3,
            got: 2
        })
    );
    assert_eq!(
        r("i", &[&[2, 3]]),
        Err(SpecError::RankMismatch {
            operand: 0,
            expected: 1,
            got: 2
        })
    );
    assert_eq!(
        r("ij,...ijk", &[&[2, 3], &[2, 3]]),
        Err(SpecError::RankTooSmall {
            operand: 1,
            min: 3,
            got: 2
        })
    );
    assert_eq!(
        r("ii", &[&[2, 3]]),
        Err(SpecError::DiagonalMismatch {
            operand: 0,
            label: 'i',
            first: 2,
            second: 3
        })
    );
    // numpy refuses 1 vs 3 within one operand too.
    assert!(matches!(r("ii", &[&[1, 3]]), Err(SpecError::DiagonalMismatch { .. })));
    assert_eq!(
        r("ij,jk->ik", &[&[2, 3], &[4, 2]]),
        Err(SpecError::ExtentMismatch {
            label: 'j',
            first: 3,
            second: 4
        })
    );
    assert_eq!(
        r("...,...", &[&[2, 2], &[3]]),
        Err(SpecError::BroadcastMismatch {
            axis: 1,
            first: 2,
            second: 3
        })
    );
    assert_eq!(
        r("...i->i", &[&[2, 3]]),
        Err(SpecError::MissingOutputEllipsis { dims: 1 })
    );
    assert_eq!(
        r("...->", &[&[2, 3]]),
        Err(SpecError::MissingOutputEllipsis { dims: 2 })
    );
    // 50 labels used, an ellipsis of 3 dims needs 53.
    let labels: String = ('A'..='Z').chain('a'..='x').collect();
    let shape = vec![1usize; 53];
    assert_eq!(
        r(&format!("{labels}..."), &[&shape]),
        Err(SpecError::TooManyLabels { needed: 53 })
    );
    assert!(r(&format!("{labels}..."), &[&shape[..52]]).is_ok());
}

#[test]
fn resolved_spec_constructors_and_checks() {
    let s = ResolvedSpec::new(&[&['i', 'i', 'j'], &['j', 'k']], &['i', 'k']).unwrap();
    assert_eq!(s.to_string(), "iij,jk->ik");
    assert!(s.has_repeated_labels());
    assert_eq!(s.num_inputs(), 2);
    assert_eq!(s.inputs()[1], vec!['j', 'k']);
    assert_eq!(s.output(), &['i', 'k']);
    assert_eq!(ResolvedSpec::parse("iij,jk->ik").unwrap(), s);
    assert_eq!("iij,jk".parse::<ResolvedSpec>().unwrap().output(), &['k']);
    assert_eq!(
        s.label_extents(&[&[2, 2, 3], &[3, 4]]).unwrap(),
        vec![('i', 2), ('j', 3), ('k', 4)]
    );
    assert_eq!(s.output_shape(&[&[2, 2, 3], &[3, 4]]).unwrap(), vec![2, 4]);
    // Strict: no broadcasting of extent 1.
    assert_eq!(
        s.output_shape(&[&[2, 2, 1], &[3, 4]]),
        Err(SpecError::ExtentMismatch {
            label: 'j',
            first: 1,
            second: 3
        })
    );
    assert_eq!(
        s.output_shape(&[&[2, 3, 3], &[3, 4]]),
        Err(SpecError::DiagonalMismatch {
            operand: 0,
            label: 'i',
            first: 2,
            second: 3
        })
    );
    assert_eq!(
        s.output_shape(&[&[2, 2, 3]]),
        Err(SpecError::OperandCount { expected: 2, got: 1 })
    );
    assert_eq!(ResolvedSpec::new(&[], &[]), Err(SpecError::NoOperands));
    assert_eq!(
        ResolvedSpec::new(&[&['a'], &['a'], &['a']], &[]),
        Err(SpecError::TooManyOperands { count: 3 })
    );
    assert_eq!(
        ResolvedSpec::new(&[&['a', '1']], &[]),
        Err(SpecError::InvalidLabel { label: '1' })
    );
    assert_eq!(
        ResolvedSpec::new(&[&['a']], &['a', 'a']),
        Err(SpecError::RepeatedOutputLabel { label: 'a' })
    );
    assert_eq!(
        ResolvedSpec::new(&[&['a']], &['b']),
        Err(SpecError::UnknownOutputLabel { label: 'b' })
    );
    assert_eq!(ResolvedSpec::parse("...i->..."), Err(SpecError::Unresolved));
    // Conversions to the parsed form keep the meaning.
    let back = EinsumSpec::from(&s);
    assert_eq!(back.resolve(&[&[2, 2, 3], &[3, 4]]).unwrap(), s);
}

#[test]
fn resolve_spec_trait_dispatches_by_kind() {
    let shapes: [&[usize]; 2] = [&[2, 1], &[2, 3]];
    let via_str = "ij,ij->ij".resolve_spec(&shapes).unwrap();
    assert_eq!(via_str.to_string(), "iA,ij->ij");
    let parsed = p("ij,ij->ij").unwrap();
    fn by_value<S: ResolveSpec>(s: S, shapes: &[&[usize]]) -> String {
        s.resolve_spec(shapes).unwrap().to_string()
    }
    assert_eq!(by_value(&parsed, &shapes), "iA,ij->ij");
    assert_eq!(by_value("ij,ij->ij", &shapes), "iA,ij->ij");
    let literal = ResolvedSpec::parse("ij,ij->ij").unwrap();
    assert_eq!(*literal.resolve_spec(&shapes).unwrap(), literal);
    assert!(literal.output_shape(&shapes).is_err());
    assert!("ij,jk,kl".resolve_spec(&shapes).is_err());
    assert_eq!(
        String::from("ij,jk")
            .resolve_spec(&[&[1, 2], &[2, 3]])
            .unwrap()
            .to_string(),
        "ij,jk->ik"
    );
}

#[test]
fn serde_uses_the_validated_string() {
    let s = p("...ij,...jk->...ik").unwrap();
    let bytes = postcard::to_allocvec(&s).unwrap();
    let text: String = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(text, "...ij,...jk->...ik");
    assert_eq!(postcard::from_bytes::<EinsumSpec>(&bytes).unwrap(), s);
    let r = s.resolve(&[&[2, 3, 4], &[4, 5]]).unwrap();
    let bytes = postcard::to_allocvec(&r).unwrap();
    assert_eq!(postcard::from_bytes::<ResolvedSpec>(&bytes).unwrap(), r);
    // Invalid strings are refused on the way in.
    for bad in ["ij,jk->ii", "i1", "ij,jk,kl->il", "ij->k"] {
        let bytes = postcard::to_allocvec(&bad.to_string()).unwrap();
        assert!(postcard::from_bytes::<EinsumSpec>(&bytes).is_err(), "{bad}");
        assert!(postcard::from_bytes::<ResolvedSpec>(&bytes).is_err(), "{bad}");
    }
    let bytes = postcard::to_allocvec(&"...i->...".to_string()).unwrap();
    assert!(postcard::from_bytes::<EinsumSpec>(&bytes).is_ok());
    assert!(postcard::from_bytes::<ResolvedSpec>(&bytes).is_err());
}
