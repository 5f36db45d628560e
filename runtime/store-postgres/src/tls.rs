//! TLS for the PostgreSQL store: libpq's `sslmode` and `sslrootcert` read out of a connection
//! string (URL or `key=value` form), and the rustls connector they ask for.
//!
//! Takes the string the user wrote; gives the rest of it parsed as a [`tokio_postgres::Config`]
//! (which knows only `disable`, `prefer` and `require`, and refuses `sslrootcert`) and one
//! [`Tls`], whose connector the pool and the `LISTEN` connection share. The rule it keeps:
//! under `require`, `verify-ca` and `verify-full` no connection is made over plain TCP, nor to
//! a server whose certificate does not chain to a trusted authority (Mozilla's, compiled in,
//! plus those of `sslrootcert`); `require` and `verify-full` also check the host name. That is
//! stricter than libpq, whose `require` checks nothing: a TLS connection that accepts any
//! certificate stops only a passive listener, which is what `prefer` is for.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;

/// What the connection string asks of TLS, libpq's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it (its certificate unchecked), else plain: the default.
    Prefer,
    /// TLS only, the certificate checked as under `verify-full` (libpq checks nothing).
    Require,
    /// TLS only, the certificate checked against the authorities, not the host name.
    VerifyCa,
    /// TLS only, the certificate checked against the authorities and the host name.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, StoreError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(StoreError::Database(
                    "sslmode=allow is not supported; write sslmode=prefer (TLS when the server \
                     offers it) or sslmode=disable"
                        .to_owned(),
                ));
            }
            other => {
                return Err(StoreError::Database(format!(
                    "sslmode={other:?} is not a TLS mode; write disable, prefer, require, \
                     verify-ca or verify-full"
                )));
            }
        })
    }

    /// Whether the connection fails rather than go without TLS (and an unverified certificate).
    pub fn verifies(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }

    /// What tokio-postgres does on the wire; the checks are the connector's.
    fn wire(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// The TLS side of a connection string: its connector, and what it was made from (for
/// messages).
#[derive(Clone)]
pub struct Tls {
    pub connector: MakeRustlsConnect,
    pub mode: SslMode,
    /// The file `sslrootcert` named, if any.
    pub root_cert: Option<PathBuf>,
}

/// Reads `text` (`postgres://…` or `host=… user=…`): the rest of it as tokio-postgres's
/// configuration, with its `sslmode` set to what goes on the wire, and the TLS to connect with.
pub fn configure(text: &str) -> Result<(tokio_postgres::Config, Tls), StoreError> {
    let (rest, found) = extract(text)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|error| {
        StoreError::Database(format!(
            "the database URL is not valid: {error}; write it as \
             postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=verify-full]"
        ))
    })?;
    // libpq's `sslrootcert=system` means the system's authorities, and makes `verify-full`
    // the default; here the authorities are always Mozilla's, so it names no file.
    let system = found.root_cert.as_deref() == Some("system");
    let mode = match found.mode.as_deref() {
        Some(mode) => SslMode::parse(mode)?,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if found.root_cert.is_some() && !mode.verifies() {
        return Err(StoreError::Database(format!(
            "sslrootcert is used only to verify the server's certificate, which sslmode={mode} \
             never does; add sslmode=verify-full (or require) to the URL"
        )));
    }
    let root_cert = found.root_cert.filter(|_| !system).map(PathBuf::from);
    config.ssl_mode(mode.wire());
    let connector = connector(mode, root_cert.as_deref())?;
    Ok((
        config,
        Tls {
            connector,
            mode,
            root_cert,
        },
    ))
}

/// What a failed connection needs said about TLS, when TLS is why it failed: the fix.
pub fn advice(error: &tokio_postgres::Error, tls: &Tls, host: &str) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        // tokio-postgres's own words, the only sign of a server that declined TLS.
        if cause.to_string() == "server does not support TLS" {
            return Some(format!(
                "the server does not accept TLS connections, and sslmode={} requires TLS: turn \
                 on ssl in the server's configuration, or write sslmode=disable to connect \
                 without encryption (on a network you trust)",
                tls.mode
            ));
        }
        // rustls's error reaches here inside tokio-rustls's `io::Error`.
        let rustls_error = cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::InvalidCertificate(problem)) = rustls_error {
            return Some(certificate_advice(problem, tls, host));
        }
        source = cause.source();
    }
    None
}

fn certificate_advice(problem: &CertificateError, tls: &Tls, host: &str) -> String {
    match problem {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => match &tls.root_cert {
            Some(path) => format!(
                "the server's certificate is not signed by a trusted certificate authority, \
                 neither a public one nor one in sslrootcert={}: check that this file holds the \
                 certificate of the authority that signed the server's",
                path.display()
            ),
            None => "the server's certificate is not signed by a public certificate authority: \
                     give the certificate of the authority that signed it (a PEM file, such as \
                     the one a cloud provider publishes) with sslrootcert=PATH"
                .to_owned(),
        },
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "the server's certificate is not issued for the host name {host:?} \
                 (sslmode={} checks it): connect by a name the certificate carries, or write \
                 sslmode=verify-ca to check the authority alone",
                tls.mode
            )
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate has expired or is not valid yet: renew it on the server, \
             or correct this machine's clock"
                .to_owned()
        }
        CertificateError::Other(other)
            if matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            "the server's certificate is an authority's (basic constraints CA:TRUE, as \
             `openssl req -x509` and Debian's snakeoil certificate make by default), which \
             cannot be verified as a server's: sign a server certificate with that authority \
             and give the server that one"
                .to_owned()
        }
        _ => "the server's certificate cannot be verified: give the server a certificate \
              issued for its host name by a certificate authority, and that authority's \
              certificate with sslrootcert=PATH"
            .to_owned(),
    }
}

/// Values of libpq's TLS parameters taken out of a connection string.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// libpq's client-certificate parameters: named in a clear error, since tokio-postgres's
/// ("unknown option") does not say that the feature is missing.
const CLIENT_CERTIFICATE: &[&str] = &["sslcert", "sslkey", "sslpassword", "sslcrl", "sslcrldir"];

/// `text` without its `sslmode` and `sslrootcert` parameters, and their values (the last of
/// each, as in libpq). A string this cannot read is handed on whole, for tokio-postgres to
/// report.
fn extract(text: &str) -> Result<(String, Found), StoreError> {
    let mut found = Found::default();
    let mut take = |key: &str, value: Cow<'_, str>| -> Result<bool, StoreError> {
        match key {
            "sslmode" => found.mode = Some(value.into_owned()),
            "sslrootcert" => found.root_cert = Some(value.into_owned()),
            _ if CLIENT_CERTIFICATE.contains(&key) => {
                return Err(StoreError::Database(format!(
                    "{key} is not supported: the store presents no client certificate; \
                     authenticate with a password (in the URL, or the server's pg_hba.conf)"
                )));
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = match url_query(text) {
        Some((head, query)) => {
            let mut kept = Vec::new();
            for pair in query.split('&') {
                let Some((key, value)) = pair.split_once('=') else {
                    kept.push(pair);
                    continue;
                };
                let key = percent_decode_str(key).decode_utf8_lossy();
                let value = percent_decode_str(value).decode_utf8().map_err(|_| {
                    StoreError::Database(format!(
                        "the URL's parameter {key} is not UTF-8 once percent-decoded"
                    ))
                })?;
                if !take(&key, value)? {
                    kept.push(pair);
                }
            }
            if kept.is_empty() {
                head.to_owned()
            } else {
                format!("{head}?{}", kept.join("&"))
            }
        }
        None if text.contains("://") => text.to_owned(),
        None => {
            let mut rest = String::with_capacity(text.len());
            let mut from = 0;
            for parameter in key_values(text) {
                if take(parameter.key, Cow::Owned(parameter.value))? {
                    rest.push_str(text.get(from..parameter.start).unwrap_or_default());
                    from = parameter.end;
                }
            }
            rest.push_str(text.get(from..).unwrap_or_default());
            rest
        }
    };
    Ok((rest, found))
}

/// A `postgres://` URL split before its `?`: where tokio-postgres looks for parameters (after
/// the credentials, which end at the first `@`).
fn url_query(text: &str) -> Option<(&str, &str)> {
    let after_scheme = ["postgres://", "postgresql://"].iter().find_map(|scheme| {
        text.strip_prefix(scheme)
            .map(|rest| text.len() - rest.len())
    })?;
    let credentials_end = text
        .get(after_scheme..)
        .and_then(|rest| rest.find('@'))
        .map_or(after_scheme, |at| after_scheme + at + 1);
    let question = credentials_end + text.get(credentials_end..)?.find('?')?;
    Some((text.get(..question)?, text.get(question + 1..)?))
}

/// One `key=value` of a libpq keyword/value string, with its byte span.
struct KeyValue<'a> {
    key: &'a str,
    value: String,
    start: usize,
    end: usize,
}

/// The parameters of a keyword/value string (`host=h sslmode='verify-full'`), read as
/// tokio-postgres reads them (quotes, backslash escapes); empty when the string is malformed,
/// so that it goes on untouched and tokio-postgres says what is wrong.
fn key_values(text: &str) -> Vec<KeyValue<'_>> {
    let mut parameters = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            return parameters;
        };
        let mut key_end = start;
        while let Some((at, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key_end = at + c.len_utf8();
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Vec::new();
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let quoted = chars.next_if(|(_, c)| *c == '\'').is_some();
        let mut value = String::new();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, escaped)) => value.push(escaped),
                    None => return Vec::new(),
                },
                '\'' if quoted => {
                    end = Some(at + 1);
                    break;
                }
                c if !quoted && c.is_whitespace() => {
                    end = Some(at);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = match end {
            Some(end) => end,
            None if !quoted => text.len(),
            None => return Vec::new(),
        };
        let Some(key) = text.get(start..key_end) else {
            return Vec::new();
        };
        parameters.push(KeyValue {
            key,
            value,
            start,
            end,
        });
    }
}

/// The connector for `mode`: every mode gets one, since the pool's type does not depend on
/// the mode (tokio-postgres does not call it under `disable`).
fn connector(mode: SslMode, root_cert: Option<&Path>) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| StoreError::Database(format!("cannot set up TLS: {error}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable | SslMode::Prefer => Arc::new(AuthorityOnly {
            roots: None,
            algorithms,
        }),
        SslMode::VerifyCa => Arc::new(AuthorityOnly {
            roots: Some(roots(root_cert)?),
            algorithms,
        }),
        SslMode::Require | SslMode::VerifyFull => {
            WebPkiServerVerifier::builder_with_provider(roots(root_cert)?, provider)
                .build()
                .map_err(|error| {
                    StoreError::Database(format!("cannot set up TLS verification: {error}"))
                })?
        }
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Mozilla's authorities, plus every certificate of the PEM file `root_cert`.
fn roots(root_cert: Option<&Path>) -> Result<Arc<RootCertStore>, StoreError> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = root_cert {
        let shown = path.display();
        let pem = std::fs::read(path).map_err(|error| {
            StoreError::Database(format!(
                "cannot read sslrootcert={shown}: {error}; give the path of a PEM file of \
                 certificate authorities (relative paths start in the working directory)"
            ))
        })?;
        let mut added = 0;
        for certificate in CertificateDer::pem_slice_iter(&pem) {
            let certificate = certificate.map_err(|error| {
                StoreError::Database(format!(
                    "sslrootcert={shown} is not a valid PEM file: {error}"
                ))
            })?;
            roots.add(certificate).map_err(|error| {
                StoreError::Database(format!(
                    "sslrootcert={shown} holds a certificate that cannot be an authority: {error}"
                ))
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(StoreError::Database(format!(
                "sslrootcert={shown} holds no certificate (no -----BEGIN CERTIFICATE----- \
                 block); give the PEM file of the authority that signed the server's certificate"
            )));
        }
    }
    Ok(Arc::new(roots))
}

/// `verify-ca` (with `roots`): the certificate chains to a trusted authority and is in date;
/// any host name. `prefer` (no `roots`): encryption against a passive listener, as in libpq.
/// Checking the certificate there would stop no active attacker, who can answer that the
/// server has no TLS, which `prefer` accepts; and it would break servers with self-signed
/// certificates (Debian's default) that connected before. The handshake's own signatures are
/// checked either way.
#[derive(Debug)]
struct AuthorityOnly {
    roots: Option<Arc<RootCertStore>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AuthorityOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let certificate = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &certificate,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::{Found, SslMode, configure, extract};

    fn found(mode: Option<&str>, root_cert: Option<&str>) -> Found {
        Found {
            mode: mode.map(str::to_owned),
            root_cert: root_cert.map(str::to_owned),
        }
    }

    #[test]
    fn the_tls_parameters_are_taken_out_of_a_url() {
        let (rest, taken) = extract(
            "postgres://ann:p%3Fw@db:5432/stratum?sslmode=verify-full&options=-c%20x%3Dy\
             &sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://ann:p%3Fw@db:5432/stratum?options=-c%20x%3Dy"
        );
        assert_eq!(
            taken,
            found(Some("verify-full"), Some("/etc/ca dir/ca.pem"))
        );

        let (rest, taken) = extract("postgresql://db/stratum?sslmode=require").unwrap();
        assert_eq!(rest, "postgresql://db/stratum");
        assert_eq!(taken, found(Some("require"), None));

        // A `?` in the password is not the query; the last sslmode wins, as in libpq.
        let (rest, taken) =
            extract("postgres://ann:a?b@db/x?sslmode=disable&sslmode=verify-ca").unwrap();
        assert_eq!(rest, "postgres://ann:a?b@db/x");
        assert_eq!(taken, found(Some("verify-ca"), None));

        let (rest, taken) = extract("postgres://db/x").unwrap();
        assert_eq!(rest, "postgres://db/x");
        assert_eq!(taken, Found::default());
    }

    #[test]
    fn the_tls_parameters_are_taken_out_of_a_key_value_string() {
        let (rest, taken) =
            extract("host=db sslmode=verify-ca user=ann sslrootcert='/a b/c\\'s.pem' dbname=x")
                .unwrap();
        assert_eq!(rest, "host=db  user=ann  dbname=x");
        assert_eq!(taken, found(Some("verify-ca"), Some("/a b/c's.pem")));
        // Malformed: handed on whole, for tokio-postgres to report.
        let (rest, taken) = extract("host=db sslmode").unwrap();
        assert_eq!(rest, "host=db sslmode");
        assert_eq!(taken, Found::default());
    }

    #[test]
    fn modes_and_their_rules() {
        let mode = |url: &str| configure(url).map(|(_, tls)| tls.mode);
        assert_eq!(mode("postgres://db/x").unwrap(), SslMode::Prefer);
        assert_eq!(
            mode("postgres://db/x?sslmode=disable").unwrap(),
            SslMode::Disable
        );
        assert_eq!(
            mode("postgres://db/x?sslmode=require").unwrap(),
            SslMode::Require
        );
        assert_eq!(
            mode("host=db sslmode=verify-ca").unwrap(),
            SslMode::VerifyCa
        );
        assert_eq!(
            mode("postgres://db/x?sslrootcert=system").unwrap(),
            SslMode::VerifyFull
        );
        let (config, _) = configure("postgres://db/x?sslmode=verify-full").unwrap();
        assert_eq!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );

        let refused = |url: &str| configure(url).err().unwrap().to_string();
        let message = refused("postgres://ann:secret@db/x?sslmode=verify");
        assert!(message.contains("verify-full"), "{message}");
        assert!(!message.contains("secret"), "{message}");
        assert!(refused("postgres://db/x?sslmode=allow").contains("prefer"));
        let message = refused("postgres://db/x?sslrootcert=/ca.pem");
        assert!(message.contains("add sslmode=verify-full"), "{message}");
        let message = refused("postgres://db/x?sslmode=disable&sslrootcert=/ca.pem");
        assert!(message.contains("sslmode=disable"), "{message}");
        let message = refused("postgres://db/x?sslcert=me.pem");
        assert!(message.contains("no client certificate"), "{message}");
    }

    #[test]
    fn a_bad_root_certificate_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let url = |path: &std::path::Path| {
            format!(
                "postgres://ann:secret@db/x?sslmode=require&sslrootcert={}",
                path.display()
            )
        };
        let message = configure(&url(&missing)).err().unwrap().to_string();
        assert!(message.contains("cannot read sslrootcert="), "{message}");
        assert!(message.contains("missing.pem"), "{message}");
        assert!(!message.contains("secret"), "{message}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let message = configure(&url(&empty)).err().unwrap().to_string();
        assert!(message.contains("holds no certificate"), "{message}");

        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let message = configure(&url(&broken)).err().unwrap().to_string();
        assert!(message.contains("broken.pem"), "{message}");
    }
}
