//! Profiles by app name: the built-in or `--library` profiles, overridden by the ones posted
//! to `POST /v1/profiles` or observed from a job's exclusive first run (both kept in the store).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use dqngpu_model::{AppLibrary, AppProfile};
use serde::Serialize;

/// Where a profile came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileSource {
    /// A library given at start.
    Library,
    /// Posted by a client.
    Api,
    /// Recorded from a job's exclusive first run.
    Observed,
}

impl ProfileSource {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileSource::Library => "library",
            ProfileSource::Api => "api",
            ProfileSource::Observed => "observed",
        }
    }

    fn parse(s: &str) -> ProfileSource {
        match s {
            "api" => ProfileSource::Api,
            "observed" => ProfileSource::Observed,
            _ => ProfileSource::Library,
        }
    }
}

/// The profiles the placement loop uses. Readers take the lock only to clone an `Arc`.
#[derive(Debug, Default)]
pub struct ProfileBook {
    map: RwLock<BTreeMap<String, (Arc<AppProfile>, ProfileSource)>>,
}

impl ProfileBook {
    /// Starts from the given libraries (later ones win) and stored profiles (which win).
    pub fn new(libraries: &[AppLibrary], stored: Vec<(AppProfile, String)>) -> Self {
        let mut map = BTreeMap::new();
        for lib in libraries {
            for (name, p) in &lib.apps {
                map.insert(name.clone(), (p.clone(), ProfileSource::Library));
            }
        }
        for (p, src) in stored {
            map.insert(p.app.name.clone(), (Arc::new(p), ProfileSource::parse(&src)));
        }
        ProfileBook { map: RwLock::new(map) }
    }

    /// The profile of `app`, if any.
    pub fn get(&self, app: &str) -> Option<Arc<AppProfile>> {
        self.map.read().ok()?.get(app).map(|(p, _)| p.clone())
    }

    /// Adds or replaces a profile.
    pub fn put(&self, p: AppProfile, source: ProfileSource) {
        if let Ok(mut m) = self.map.write() {
            m.insert(p.app.name.clone(), (Arc::new(p), source));
        }
    }

    /// Every profile with the key jobs name it by (a library's key: its file stem where several
    /// files share an app name) and its source.
    pub fn all(&self) -> Vec<(String, Arc<AppProfile>, ProfileSource)> {
        self.map.read().map(|m| m.iter().map(|(k, (p, s))| (k.clone(), p.clone(), *s)).collect()).unwrap_or_default()
    }
}
