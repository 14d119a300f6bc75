//! What the OpenAPI document says about the campaign events API's inputs and errors: the query parameters each
//! route accepts (checked by hand in `api`, which also refuses unknown and repeated ones) and the error envelope.
//! Documentation-only types: the handlers read the raw query so that an unknown parameter is a 400 naming it.

#![allow(dead_code)] // fields are read by the derives only

use utoipa::{IntoParams, ToSchema};

/// `{ "error": message }`.
#[derive(ToSchema)]
#[schema(as = CampaignsError)]
pub(crate) struct ErrorBody {
    /// What went wrong, for a person (a 500 says only "internal server error").
    error: String,
}

/// A campaign's status as Studio shows it.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum UiStatus {
    Suggestions,
    Running,
    Paused,
    Ended,
}

/// Where a campaign comes from.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum Origin {
    Flow,
    External,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum SortKey {
    UpdatedAt,
    Name,
    StartsAt,
    EndsAt,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum Order {
    Asc,
    Desc,
}

/// The kinds of live events (`crate::live_model::KINDS`).
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum LiveEventKind {
    RunCompleted,
    RunDeadLettered,
    NotificationDelivered,
    Interaction,
}

/// `GET /api/v1/overview`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct OverviewQuery {
    /// The tenant.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant_id: String,
}

/// `GET /api/v1/campaigns`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CampaignsQuery {
    /// The tenant.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant_id: String,
    /// The page, from 1 (default 1).
    #[param(minimum = 1, maximum = 1_000_000)]
    page: Option<u64>,
    /// Rows per page (default 20).
    #[param(minimum = 1, maximum = 100)]
    page_size: Option<u64>,
    #[param(inline)]
    ui_status: Option<UiStatus>,
    #[param(inline)]
    campaign_origin: Option<Origin>,
    #[param(inline)]
    sort: Option<SortKey>,
    #[param(inline)]
    order: Option<Order>,
}

/// `GET /api/v1/campaigns/{campaign_id}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CampaignQuery {
    /// The tenant, when the caller wants the campaign only if it is this tenant's.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant_id: Option<String>,
}

/// `GET /api/v1/live-events`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LiveEventsQuery {
    /// The tenant.
    #[param(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    tenant_id: String,
    /// The page, from 1 (default 1).
    #[param(minimum = 1, maximum = 1_000_000)]
    page: Option<u64>,
    /// Events per page (default 20).
    #[param(minimum = 1, maximum = 100)]
    page_size: Option<u64>,
    #[param(inline)]
    kind: Option<LiveEventKind>,
    /// A flow's id, or `external:<id>`.
    #[param(pattern = "^(external:)?[A-Za-z0-9._-]{1,128}$")]
    campaign_id: Option<String>,
}
