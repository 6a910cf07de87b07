//! The Redis Cluster path: a request is grouped by slot; one slot is one exact call, more
//! are decided in two phases (`peek` on every slot, then `commit` only if nothing enforced
//! is over). The module documentation of [`super`] states the guarantee this gives. A
//! charge counts every item whatever it finds, so it needs no first phase: one `charge`
//! call per slot.

use super::failure::Failure;
use super::script::{CallTimes, Mode};
use super::{key, Inner};
use crate::algorithm::Decision;
use crate::store::batch::admits;
use crate::store::Check;
use futures_util::future::join_all;
use redis::cluster_async::ClusterConnection;
use std::collections::BTreeMap;

impl Inner {
    /// Groups by slot: one exact call when there is one slot, else peek then commit.
    pub(super) async fn decide_cluster(
        &self,
        conn: ClusterConnection,
        batch: &[Check],
        mode: Mode,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, c) in batch.iter().enumerate() {
            let slot = key::slot(&key::redis_key(&self.options.key_prefix, &c.key, &c.limit));
            groups.entry(slot).or_default().push(i);
        }
        if groups.len() == 1 {
            let items: Vec<&Check> = batch.iter().collect();
            return self.call(&mut conn.clone(), &items, mode, now).await;
        }
        if matches!(mode, Mode::Charge | Mode::Count) {
            // Per-descriptor counting and charges: no slot waits for the others' verdict.
            return self.call_groups(&conn, batch, &groups, mode, now).await;
        }
        let peek = self
            .call_groups(&conn, batch, &groups, Mode::Peek, now)
            .await?;
        if !admits(batch, |i| peek.get(i).is_some_and(|d| d.allowed)) {
            return Ok(peek);
        }
        self.call_groups(&conn, batch, &groups, Mode::Commit, now)
            .await
    }

    /// One call per slot group, sent concurrently; the answers back in batch order.
    async fn call_groups(
        &self,
        conn: &ClusterConnection,
        batch: &[Check],
        groups: &BTreeMap<u16, Vec<usize>>,
        mode: Mode,
        now: &CallTimes,
    ) -> Result<Vec<Decision>, Failure> {
        let calls = groups.values().map(|idx| {
            let mut conn = conn.clone();
            async move {
                let items: Vec<&Check> = idx.iter().map(|&i| &batch[i]).collect();
                self.call(&mut conn, &items, mode, now).await
            }
        });
        let answers = join_all(calls).await;
        let mut out: Vec<Option<Decision>> = vec![None; batch.len()];
        for (idx, answer) in groups.values().zip(answers) {
            for (&i, d) in idx.iter().zip(answer?) {
                out[i] = Some(d);
            }
        }
        out.into_iter()
            .map(|d| d.ok_or_else(|| Failure::Reply("a slot group went unanswered".into())))
            .collect()
    }
}
