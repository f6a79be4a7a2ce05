//! Real threads.

use crate::contender::Contender;
use crate::scenario::Scenario;

pub fn compare(_scenario: &Scenario, _contenders: &[Contender], _threads: usize) -> String {
    String::new()
}
