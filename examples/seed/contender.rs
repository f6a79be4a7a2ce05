//! The depot policies compared, and the Linux rule each one stands for.

use magazine::{Config, DepotPolicy, Trim};

use crate::scenario::Scenario;

/// What a policy is in the comparison (the checks look policies up by role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Linux <= 6.6: `MAX_GLOBAL_MAGS = 32`.
    Fixed32,
    /// The seed report's patch: a fixed depot scaled with the CPU count.
    SeedPatch,
    /// Linux >= 6.7: unbounded list, one magazine freed per 100 ms above `num_online_cpus()`.
    OnePerTick,
    /// This crate: trim the working set. `chosen` marks the interval the checks use.
    WorkingSet { chosen: bool },
    /// A depot that grows and is never trimmed: the best slow-path rate any depot reaches.
    NeverTrimmed,
}

/// A policy under test: the cache configuration and the trim schedule it runs with.
#[derive(Clone, Debug)]
pub struct Contender {
    pub name: String,
    pub role: Role,
    pub depot: DepotPolicy,
    /// Simulated ms between two `trim()` calls; `None`: never trimmed.
    pub trim_every_ms: Option<u64>,
}

impl Contender {
    /// Every policy of the comparison, in table order.
    pub fn all(scenario: &Scenario) -> Vec<Contender> {
        let cpus = scenario.cpus;
        let target = scenario.target();
        let seed_cap = cpus.max(32);
        let mut all = vec![
            Contender {
                name: "Fixed{32}".into(),
                role: Role::Fixed32,
                depot: DepotPolicy::Fixed { max_full: 32 },
                trim_every_ms: None,
            },
            Contender {
                name: format!("Fixed{{{seed_cap}}}"),
                role: Role::SeedPatch,
                depot: DepotPolicy::Fixed { max_full: seed_cap },
                trim_every_ms: None,
            },
            Contender {
                name: format!("OnePerTick{{{target}}}"),
                role: Role::OnePerTick,
                depot: DepotPolicy::Dynamic {
                    target,
                    trim: Trim::OnePerTick,
                },
                trim_every_ms: Some(scenario.one_per_tick_ms),
            },
        ];
        all.extend(
            scenario
                .working_set_ms
                .iter()
                .enumerate()
                .map(|(i, &ms)| Contender {
                    name: format!("WorkingSet{{{target}}}"),
                    role: Role::WorkingSet { chosen: i == 0 },
                    depot: DepotPolicy::Dynamic {
                        target,
                        trim: Trim::WorkingSet,
                    },
                    trim_every_ms: Some(ms),
                }),
        );
        all.push(Contender {
            name: "never trimmed".into(),
            role: Role::NeverTrimmed,
            depot: DepotPolicy::Dynamic {
                target,
                trim: Trim::WorkingSet,
            },
            trim_every_ms: None,
        });
        all
    }

    /// The name with its trim period: unique within a run.
    pub fn label(&self) -> String {
        match self.trim_every_ms {
            Some(ms) => format!("{} /{}", self.name, millis(ms)),
            None => self.name.clone(),
        }
    }

    /// The cache configuration of this policy.
    pub fn config(&self, scenario: &Scenario) -> Config {
        Config {
            magazine_size: scenario.magazine_size,
            cpus: scenario.cpus,
            depot: self.depot,
        }
    }

    /// The depot length this policy brings the depot back to: the cap of a fixed depot,
    /// the trim target of a dynamic one.
    pub fn target(&self) -> usize {
        match self.depot {
            DepotPolicy::Fixed { max_full } => max_full,
            DepotPolicy::Dynamic { target, .. } => target,
        }
    }
}

/// `1500` -> "1.5s", `100` -> "100ms".
pub fn millis(ms: u64) -> String {
    if ms >= 1000 && ms % 100 == 0 {
        format!("{}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}
