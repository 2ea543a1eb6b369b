//! `carrier-proof.json` `carrierGuarantees.g1_declaration` (§4.4 guarantee
//! 1, §11): a carrier declaration carries all seven constants under the
//! carrier role URI, or it rejects.

use crate::{Section, array_at, expect_eq, str_at};
use ed25519_dalek::SigningKey;
use rltp_proofs::constants::{CARRIER_ROLE, CONSTANT_NAMES, CarrierConstants};
use rltp_proofs::declaration::{
    CarrierDeclarationError, DeclarationHeader, accept_carrier_declaration, is_known_document_type,
    parse_declaration, sign_declaration, verify_declaration,
};
use rltp_proofs::json::{self, Object};
use rltp_proofs::multikey::DidKey;

/// A fixed test key: the runner signs its own declarations (the vector
/// ships constants, not a signed document).
fn key() -> SigningKey {
    SigningKey::from_bytes(&rltp_proofs::encoding::sha256(
        b"rltp-vectors/declaration-key",
    ))
}

const HEADER: DeclarationHeader<'static> = DeclarationHeader {
    id: "0d7e6a4c-6a52-4c1e-9f3b-1d2c3b4a5f60",
    thread_id: "5b0f3c8e-2d1a-4e7b-8c9d-0a1b2c3d4e5f",
    issued_at: "2026-11-29T12:00:00Z",
    created: "2026-11-29T12:00:00Z",
    revision: 1,
};

/// Signs a declaration of `constants` under `role`, then runs parse →
/// verify → accept on its bytes.
fn declare(
    role: &str,
    constants: &Object,
) -> Result<Result<CarrierConstants, CarrierDeclarationError>, String> {
    let key = key();
    let recipient = DidKey::from_verifying_key(&key.verifying_key());
    let bytes =
        sign_declaration(&key, &recipient, &HEADER, role, constants).map_err(|e| e.to_string())?;
    let parsed = parse_declaration(&bytes).map_err(|e| e.to_string())?;
    let verified = verify_declaration(parsed).map_err(|e| e.to_string())?;
    Ok(accept_carrier_declaration(&verified).map(|d| d.constants().clone()))
}

/// Runs the section: the shipped declaration accepted, each shipped reject.
pub fn g1_declaration(v: &serde_json::Value, s: &mut Section) {
    let base = "/carrierGuarantees/g1_declaration";
    let declared = match v.pointer(&format!("{base}/declaration")) {
        Some(d) => json::from_serde(d),
        None => return s.case("declaration", Err("missing".into())),
    };
    let Some(constants) = declared.as_object().cloned() else {
        return s.case("declaration", Err("not an object".into()));
    };
    s.case(
        "required names are exactly the seven",
        array_at(v, &format!("{base}/required")).and_then(|names| {
            let names: Vec<&str> = names.iter().filter_map(|n| n.as_str()).collect();
            expect_eq("names", names.as_slice(), CONSTANT_NAMES.as_slice())
        }),
    );
    s.case(
        "roleURI is the carrier role and is an unknown document type",
        str_at(v, &format!("{base}/roleURI")).and_then(|role| {
            expect_eq("role", role, CARRIER_ROLE)?;
            expect_eq(
                "known as a document type",
                is_known_document_type(role),
                false,
            )
        }),
    );
    s.case(
        "the shipped declaration is accepted and binds its values",
        declare(CARRIER_ROLE, &constants).and_then(|accepted| {
            let accepted = accepted.map_err(|e| e.to_string())?;
            let canonical =
                |o: Object| rltp_proofs::jcs::canonicalize(&o.into()).map_err(|e| e.to_string());
            expect_eq(
                "re-declared constants (JCS)",
                canonical(accepted.to_declared())?,
                canonical(constants.clone())?,
            )
        }),
    );
    let rejects = match array_at(v, &format!("{base}/rejects")) {
        Ok(rejects) => rejects,
        Err(why) => return s.case("rejects", Err(why)),
    };
    for reject in rejects {
        if let Some(name) = reject.get("missing").and_then(|m| m.as_str()) {
            let mut reduced = constants.clone();
            s.case(
                format!("missing {name}"),
                match reduced.remove(name) {
                    None => Err(format!("{name} is not in the shipped declaration")),
                    Some(_) => match declare(CARRIER_ROLE, &reduced) {
                        Ok(Err(CarrierDeclarationError::Constants(_))) => Ok(()),
                        other => Err(format!("expected a constants rejection, got {other:?}")),
                    },
                },
            );
        } else if let Some(role) = reject.get("wrongRole").and_then(|r| r.as_str()) {
            s.case(
                format!("wrong role {role}"),
                match declare(role, &constants) {
                    Ok(Err(CarrierDeclarationError::NotCarrierRole { role: got })) => {
                        expect_eq("role", got.as_str(), role)
                    }
                    other => Err(format!("expected NotCarrierRole, got {other:?}")),
                },
            );
        } else {
            s.case("reject", Err(format!("unrecognised reject {reject}")));
        }
    }
}
