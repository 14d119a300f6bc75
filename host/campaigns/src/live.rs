//! The live-events slice: a tenant's recent engagement activity, read incrementally from three of Flowhost's
//! stores, each with its own cursor:
//!
//! | Source | Read | Live event `kind` |
//! |---|---|---|
//! | `flow_runs` | runs `completed` or `dead_lettered` with a `tenant_id`, by `updated_ms` | `run_completed`, `run_dead_lettered` |
//! | `webpush_activity` | notifications with `delivered: true`, by `updated_at` | `notification_delivered` |
//! | `webpush_events` | browser and semantic interactions, by `received_at` | `interaction` |
//!
//! A delivery names its run; an interaction names its notification, whose activity names the run; the run names
//! its flow, which is the campaign. Each delivery or interaction of a known campaign also records the player in
//! `campaign_engagement` (one document per tenant, campaign and player), and the campaign's row gets its
//! `players_engaged`, `deliveries` and `interactions` counted again.
//!
//! A list's totals are kept, not counted per request (a count is a pass over every matching event):
//! `live_event_hours` holds a tenant's events per kind for each hour with events (id `<tenant_id>:<hour start,
//! ms>`), counted again whenever a pass writes an event into that hour; `live_event_totals` (id `<tenant_id>`)
//! is the sum of the tenant's hours, summed again when one changes. Both are recomputed, never incremented, so
//! re-reads and several replicas converge on the right counts. A tenant without totals (its events predate them)
//! has every hour from its oldest to its newest event counted once.
//!
//! Each source is read again from a little before its cursor (a write that committed late is not missed) until
//! that window closes (see [`crate::overlap`]); the events of that overlap which the last completed pass already
//! wrote and counted, unchanged, are skipped ([`Settled`]), so a quiet pass writes nothing.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use flowhost_core::collections::{FLOW_RUNS, WEBPUSH_ACTIVITY, WEBPUSH_EVENTS};
use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, PortError, Query};
use flowhost_core::stored::Collection;
use serde_json::{json, Value};

use crate::live_model::{LiveCounts, LiveEvent, ENGAGEMENT, KINDS, LIVE_EVENTS, LIVE_EVENT_HOURS, LIVE_EVENT_TOTALS};
use crate::model::{instant_ms, CampaignDoc};
use crate::overlap::Overlaps;
use crate::read_model::ReadModels;

const HOUR_MS: i64 = 3_600_000;

/// Pages one pass reads per source at most.
const MAX_PAGES_PER_PASS: usize = 50;

/// What one pass of the slice changed.
#[derive(Debug, Default)]
pub struct LiveChanges {
    /// Tenants with new live events.
    pub tenants: BTreeSet<String>,
    /// Campaigns (tenant, campaign) whose engagement changed.
    pub campaigns: BTreeSet<(String, String)>,
    /// Hours (tenant, hour start) with events written.
    pub hours: BTreeSet<(String, i64)>,
    pub events_written: usize,
    pub lag_seconds: f64,
}

fn index(fields: &[&str]) -> IndexSpec {
    IndexSpec::ascending(fields)
}

/// The indexes of the live-event read models, and those the slice's incremental reads need on its sources.
pub async fn ensure_indexes(read_models: &ReadModels, source: &dyn DocumentStore) -> Result<(), PortError> {
    Collection::<LiveEvent>::new(read_models.documents.clone()).ensure_indexes().await?;
    Collection::<LiveCounts>::new(read_models.documents.clone()).ensure_indexes().await?;
    read_models.documents.ensure_index(ENGAGEMENT, &index(&["tenant_id", "campaign_id"])).await?;
    source.ensure_index(FLOW_RUNS, &index(&["updated_ms"])).await?;
    source.ensure_index(WEBPUSH_ACTIVITY, &index(&["delivered", "updated_at"])).await?;
    source.ensure_index(WEBPUSH_EVENTS, &index(&["received_at"])).await?;
    Ok(())
}

/// One source's incremental read: the documents changed since `cursor` (minus the overlap), oldest first, at
/// most [`MAX_PAGES_PER_PASS`] pages; the newest position seen; whether it caught up.
struct Read {
    items: Vec<Value>,
    newest: Option<i64>,
    caught_up: bool,
}

/// Reads `collection` where `field` (milliseconds, or an RFC 3339 string when `iso`) is at or after `since`
/// (the cursor, less the overlap while its window is open; see [`crate::overlap`]). `cursor` starts the newest
/// position.
async fn read_since(
    source: &dyn DocumentStore,
    collection: &str,
    field: &str,
    iso: bool,
    extra: &[(&str, Filter)],
    (cursor, since): (Option<i64>, Option<i64>),
    batch: u64,
) -> Result<Read, PortError> {
    let position = |item: &Value| -> Option<i64> {
        let value = item.get(field)?;
        if iso {
            instant_ms(value.as_str()?)
        } else {
            value.as_i64()
        }
    };
    let mut read = Read { items: Vec::new(), newest: cursor, caught_up: false };
    let mut offset = 0u64;
    for _ in 0..MAX_PAGES_PER_PASS {
        let mut query = Query::new().sort(field, Direction::Asc).limit(batch).offset(offset).without_total();
        for (path, filter) in extra {
            query = query.filter(path, filter.clone());
        }
        if let Some(since) = since {
            let bound = if iso { json!(flowhost_core::digest::iso_utc(since)) } else { json!(since) };
            query = query.filter(field, Filter::Gte(bound));
        }
        let items = source.query(collection, &query).await?.items;
        let count = items.len() as u64;
        for item in &items {
            if let Some(at) = position(item) {
                read.newest = Some(read.newest.map_or(at, |newest| newest.max(at)));
            }
        }
        read.items.extend(items);
        offset += count;
        if count < batch {
            read.caught_up = true;
            break;
        }
    }
    Ok(read)
}

/// The live events the last completed pass read, by id. A pass reads the overlap before each cursor again and
/// skips the events it finds here unchanged, so a quiet pass writes and counts nothing. Kept in memory: a new
/// process, or the pass after a failed one, processes the overlap again, which is idempotent.
#[derive(Default)]
pub struct Settled(std::sync::Mutex<HashMap<String, LiveEvent>>);

impl Settled {
    /// Those of `events` not settled as they are now.
    fn unsettled(&self, events: &[LiveEvent]) -> Vec<LiveEvent> {
        let settled = self.0.lock().unwrap_or_else(|p| p.into_inner());
        events.iter().filter(|event| settled.get(&event.event_id) != Some(*event)).cloned().collect()
    }

    /// After a pass whose writes and counts all completed: what it read is settled.
    fn settle(&self, read: Vec<LiveEvent>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
            read.into_iter().map(|event| (event.event_id.clone(), event)).collect();
    }
}

/// The live-events slice over the main store.
pub struct LiveSync<'a> {
    pub read_models: &'a ReadModels,
    pub source: &'a dyn DocumentStore,
    pub batch: u64,
    pub settled: &'a Settled,
    pub overlaps: &'a Overlaps,
}

impl LiveSync<'_> {
    async fn cursor(&self, name: &str) -> Result<Option<i64>, PortError> {
        Ok(self.read_models.cursor(name).await?.and_then(|text| text.parse().ok()))
    }

    /// The cursor named `name`, and where a pass that began at `started` reads from it.
    async fn window(&self, name: &str, started: Instant) -> Result<(Option<i64>, Option<i64>), PortError> {
        let cursor = self.cursor(name).await?;
        Ok((cursor, cursor.map(|cursor| self.overlaps.since(name, cursor, started))))
    }

    async fn put_cursor(&self, name: &str, at: Option<i64>) -> Result<(), PortError> {
        match at {
            Some(at) => self.read_models.put_cursor(name, &at.to_string()).await,
            None => Ok(()),
        }
    }

    /// One pass over the three sources (see the module documentation).
    pub async fn pass(&self, now_ms: i64, started: Instant) -> Result<LiveChanges, PortError> {
        let mut changes = LiveChanges::default();
        let mut lag_from: Vec<i64> = Vec::new();
        let mut read: Vec<LiveEvent> = Vec::new();
        let mut unsettled = |events: Vec<LiveEvent>| {
            let new = self.settled.unsettled(&events);
            read.extend(events);
            new
        };

        let runs_cursor = "live_events.runs";
        let runs_window = self.window(runs_cursor, started).await?;
        let finished = Filter::In(vec![json!("completed"), json!("dead_lettered")]);
        let runs =
            read_since(self.source, FLOW_RUNS, "updated_ms", false, &[("status", finished)], runs_window, self.batch)
                .await?;
        let events = unsettled(runs.items.iter().filter_map(run_event).collect());
        self.write(&events, &mut changes).await?;
        if !runs.caught_up {
            lag_from.extend(runs.newest);
        }
        self.put_cursor(runs_cursor, runs.newest).await?;

        let deliveries_cursor = "live_events.deliveries";
        let deliveries_window = self.window(deliveries_cursor, started).await?;
        let deliveries = read_since(
            self.source,
            WEBPUSH_ACTIVITY,
            "updated_at",
            true,
            &[("delivered", Filter::Eq(json!(true)))],
            deliveries_window,
            self.batch,
        )
        .await?;
        let run_ids: Vec<String> =
            deliveries.items.iter().filter_map(|a| Some(a.get("run_id")?.as_str()?.to_owned())).collect();
        let flows = self.flows_of_runs(&run_ids).await?;
        let events = unsettled(deliveries.items.iter().filter_map(|a| delivery_event(a, &flows)).collect());
        self.write(&events, &mut changes).await?;
        self.engage(&events, &mut changes).await?;
        if !deliveries.caught_up {
            lag_from.extend(deliveries.newest);
        }
        self.put_cursor(deliveries_cursor, deliveries.newest).await?;

        let interactions_cursor = "live_events.interactions";
        let interactions_window = self.window(interactions_cursor, started).await?;
        let interactions =
            read_since(self.source, WEBPUSH_EVENTS, "received_at", true, &[], interactions_window, self.batch).await?;
        let notification_ids: Vec<String> =
            interactions.items.iter().filter_map(|e| Some(e.get("notification_id")?.as_str()?.to_owned())).collect();
        let activity = self.source.get_many(WEBPUSH_ACTIVITY, &notification_ids).await?;
        let run_of: HashMap<String, String> =
            activity.iter().filter_map(|(id, a)| Some((id.clone(), a.get("run_id")?.as_str()?.to_owned()))).collect();
        let flows = self.flows_of_runs(&run_of.values().cloned().collect::<Vec<_>>()).await?;
        let events =
            unsettled(interactions.items.iter().filter_map(|e| interaction_event(e, &run_of, &flows)).collect());
        self.write(&events, &mut changes).await?;
        self.engage(&events, &mut changes).await?;
        if !interactions.caught_up {
            lag_from.extend(interactions.newest);
        }
        self.put_cursor(interactions_cursor, interactions.newest).await?;

        changes.lag_seconds = lag_from.into_iter().min().map_or(0.0, |at| ((now_ms - at).max(0) as f64) / 1000.0);
        self.recount(&changes.campaigns).await?;
        // A tenant's history is counted before its new hours are added to its totals.
        self.count_missing_totals(&changes.tenants).await?;
        self.count_hours(&changes.hours).await?;
        self.settled.settle(read);
        for (name, (cursor, _), read) in [
            (runs_cursor, runs_window, runs.caught_up),
            (deliveries_cursor, deliveries_window, deliveries.caught_up),
            (interactions_cursor, interactions_window, interactions.caught_up),
        ] {
            if let (Some(cursor), true) = (cursor, read) {
                self.overlaps.completed(name, cursor, started);
            }
        }
        Ok(changes)
    }

    /// Counts the events of `hours` again, then the totals of their tenants (see the module documentation).
    async fn count_hours(&self, hours: &BTreeSet<(String, i64)>) -> Result<(), PortError> {
        let documents = self.read_models.documents.as_ref();
        let mut counted = Vec::new();
        for (tenant, hour_ms) in hours {
            let mut counts = std::collections::BTreeMap::new();
            for kind in KINDS {
                let query = Query::new()
                    .eq("tenant_id", json!(tenant))
                    .eq("kind", json!(kind))
                    .filter("occurred_ms", Filter::Gte(json!(hour_ms)))
                    .filter("occurred_ms", Filter::Lt(json!(hour_ms + HOUR_MS)))
                    .limit(1);
                let total = documents.query(LIVE_EVENTS, &query).await?.total;
                if total > 0 {
                    counts.insert(kind.to_owned(), total);
                }
            }
            counted.push(LiveCounts { tenant_id: tenant.clone(), hour_ms: Some(*hour_ms), counts });
        }
        Collection::<LiveCounts>::new(self.read_models.documents.clone()).upsert_many(&counted).await?;
        let tenants: BTreeSet<&String> = hours.iter().map(|(tenant, _)| tenant).collect();
        for tenant in tenants {
            self.sum_hours(tenant).await?;
        }
        Ok(())
    }

    /// The tenant's totals, summed from its hours.
    async fn sum_hours(&self, tenant: &str) -> Result<(), PortError> {
        let documents = self.read_models.documents.as_ref();
        let query = Query::new().eq("tenant_id", json!(tenant)).without_total();
        let mut totals = LiveCounts { tenant_id: tenant.to_owned(), ..LiveCounts::default() };
        for item in documents.query(LIVE_EVENT_HOURS, &query).await?.items {
            let Ok(hour) = serde_json::from_value::<LiveCounts>(item) else { continue };
            for (kind, count) in hour.counts {
                *totals.counts.entry(kind).or_default() += count;
            }
        }
        Collection::<LiveCounts>::named(self.read_models.documents.clone(), LIVE_EVENT_TOTALS).upsert(&totals).await
    }

    /// Gives each of `tenants` without totals its counts: every hour from its oldest to its newest event. Which
    /// tenants have totals is one read, however many tenants there are (this runs on every pass).
    pub async fn count_missing_totals(&self, tenants: &BTreeSet<String>) -> Result<(), PortError> {
        let documents = self.read_models.documents.as_ref();
        let ids: Vec<String> = tenants.iter().cloned().collect();
        let counted = documents.get_many(LIVE_EVENT_TOTALS, &ids).await?;
        for tenant in tenants.iter().filter(|tenant| !counted.contains_key(*tenant)) {
            let edge = |direction| {
                let query =
                    Query::new().eq("tenant_id", json!(tenant)).sort("occurred_ms", direction).limit(1).without_total();
                async move {
                    let items = documents.query(LIVE_EVENTS, &query).await?.items;
                    Ok::<_, PortError>(items.first().and_then(|event| event.get("occurred_ms")?.as_i64()))
                }
            };
            let (Some(oldest), Some(newest)) = (edge(Direction::Asc).await?, edge(Direction::Desc).await?) else {
                self.sum_hours(tenant).await?;
                continue;
            };
            let hours: BTreeSet<(String, i64)> = (hour_of(oldest)..=hour_of(newest))
                .step_by(HOUR_MS as usize)
                .map(|hour_ms| (tenant.clone(), hour_ms))
                .collect();
            self.count_hours(&hours).await?;
        }
        Ok(())
    }

    /// The flow (campaign) of each run, by run id.
    async fn flows_of_runs(&self, run_ids: &[String]) -> Result<HashMap<String, String>, PortError> {
        let unique: BTreeSet<&String> = run_ids.iter().collect();
        let unique: Vec<String> = unique.into_iter().cloned().collect();
        let runs = self.source.get_many(FLOW_RUNS, &unique).await?;
        Ok(runs.into_iter().filter_map(|(id, run)| Some((id, run.get("flow_id")?.as_str()?.to_owned()))).collect())
    }

    async fn write(&self, events: &[LiveEvent], changes: &mut LiveChanges) -> Result<(), PortError> {
        if events.is_empty() {
            return Ok(());
        }
        Collection::<LiveEvent>::new(self.read_models.documents.clone()).upsert_many(events).await?;
        changes.events_written += events.len();
        changes.tenants.extend(events.iter().map(|event| event.tenant_id.clone()));
        changes.hours.extend(events.iter().map(|event| (event.tenant_id.clone(), hour_of(event.occurred_ms))));
        Ok(())
    }

    /// Records the players of deliveries and interactions of known campaigns.
    async fn engage(&self, events: &[LiveEvent], changes: &mut LiveChanges) -> Result<(), PortError> {
        let mut docs = Vec::new();
        for event in events {
            let (Some(campaign), Some(player)) = (&event.campaign_id, event.player_id) else { continue };
            let id = format!("{}:{campaign}:{player}", event.tenant_id);
            docs.push((id, json!({"tenant_id": event.tenant_id, "campaign_id": campaign, "player_id": player})));
            changes.campaigns.insert((event.tenant_id.clone(), campaign.clone()));
        }
        if docs.is_empty() {
            return Ok(());
        }
        self.read_models.documents.upsert_many(ENGAGEMENT, docs).await
    }

    /// Counts the engagement of `campaigns` again into their rows.
    async fn recount(&self, campaigns: &BTreeSet<(String, String)>) -> Result<(), PortError> {
        let documents = self.read_models.documents.as_ref();
        let count = |collection: &'static str, tenant: &str, campaign: &str, kind: Option<&'static str>| {
            let mut query = Query::new().eq("tenant_id", json!(tenant)).eq("campaign_id", json!(campaign)).limit(1);
            if let Some(kind) = kind {
                query = query.eq("kind", json!(kind));
            }
            async move { documents.query(collection, &query).await.map(|page| page.total) }
        };
        let mut rows: Vec<CampaignDoc> = Vec::new();
        for (tenant, campaign) in campaigns {
            let Some(mut row) = self.read_models.campaign(campaign, Some(tenant)).await? else { continue };
            row.players_engaged = count(ENGAGEMENT, tenant, campaign, None).await?;
            row.deliveries = count(LIVE_EVENTS, tenant, campaign, Some("notification_delivered")).await?;
            row.interactions = count(LIVE_EVENTS, tenant, campaign, Some("interaction")).await?;
            rows.push(row);
        }
        self.read_models.put_rows(&rows).await
    }
}

/// The start of the hour `at_ms` is in.
fn hour_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(HOUR_MS) * HOUR_MS
}

fn text(value: &Value, field: &str) -> Option<String> {
    value.get(field)?.as_str().map(str::to_owned)
}

/// A finished run with a tenant.
fn run_event(run: &Value) -> Option<LiveEvent> {
    let tenant_id = text(run, "tenant_id")?;
    let run_id = text(run, "run_id")?;
    let kind = match run.get("status")?.as_str()? {
        "completed" => "run_completed",
        "dead_lettered" => "run_dead_lettered",
        _ => return None,
    };
    let occurred_ms = run.get("updated_ms")?.as_i64()?;
    Some(LiveEvent {
        event_id: format!("run:{run_id}"),
        tenant_id,
        kind: kind.to_owned(),
        occurred_at: text(run, "finished_at").unwrap_or_else(|| flowhost_core::digest::iso_utc(occurred_ms)),
        occurred_ms,
        campaign_id: text(run, "flow_id"),
        run_id: Some(run_id),
        notification_id: None,
        player_id: None,
        channel: None,
        interaction_type: None,
    })
}

/// A delivered notification.
fn delivery_event(activity: &Value, flows: &HashMap<String, String>) -> Option<LiveEvent> {
    let notification_id = text(activity, "notification_id")?;
    let occurred_at = text(activity, "updated_at")?;
    let run_id = text(activity, "run_id");
    Some(LiveEvent {
        event_id: format!("delivery:{notification_id}"),
        tenant_id: text(activity, "tenant_id")?,
        kind: "notification_delivered".to_owned(),
        occurred_ms: instant_ms(&occurred_at)?,
        occurred_at,
        campaign_id: run_id.as_ref().and_then(|run| flows.get(run).cloned()),
        run_id,
        notification_id: Some(notification_id),
        player_id: activity.get("player_id").and_then(Value::as_i64),
        channel: text(activity, "channel"),
        interaction_type: None,
    })
}

/// A browser or semantic interaction with a notification.
fn interaction_event(
    event: &Value,
    run_of: &HashMap<String, String>,
    flows: &HashMap<String, String>,
) -> Option<LiveEvent> {
    let notification_id = text(event, "notification_id")?;
    let occurred_at = text(event, "received_at")?;
    let run_id = run_of.get(&notification_id).cloned();
    Some(LiveEvent {
        event_id: format!(
            "interaction:{}:{}:{}:{}",
            text(event, "tenant_id")?,
            event.get("player_id").and_then(Value::as_i64)?,
            text(event, "source")?,
            text(event, "event_id")?
        ),
        tenant_id: text(event, "tenant_id")?,
        kind: "interaction".to_owned(),
        occurred_ms: instant_ms(&occurred_at)?,
        occurred_at,
        campaign_id: run_id.as_ref().and_then(|run| flows.get(run).cloned()),
        run_id,
        notification_id: Some(notification_id),
        player_id: event.get("player_id").and_then(Value::as_i64),
        channel: None,
        interaction_type: text(event, "event_type"),
    })
}
