//! The macros that implement the SQL inboxes' [`Inbox`](crate::inbox::Inbox)
//! methods shared by every dialect (`sql_inbox!`), and the accept and lease of
//! the dialects with `RETURNING` (`returning_ops!`).

/// Implements for `$inbox` (fields `pool`, `sql: Arc<InboxStatements>`,
/// `command_timeout`) the [`Inbox`](crate::inbox::Inbox) methods that are
/// the same in every dialect; the backend supplies `accept_event`,
/// `lease_events` and `complete_events` (without the timeout). Methods of
/// one dialect's own follow a `;` (they go in the same `impl Inbox`); the
/// others keep the trait's defaults.
macro_rules! sql_inbox {
    ($inbox:ident, $pool:ty, $db:ty $(; $($own:tt)*)?) => {
        const _: () = {
            use std::time::Duration;

            use $crate::dedup::sql::within;
            use $crate::inbox::sql::{DeadRow, ListParam, dead};
            use $crate::inbox::{
                Accepted, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter,
                DeadLetterPage, Inbox, InboxError, InboxStats, LeasedEvent, NewEvent, Transition,
                millis, truncate_error,
            };

            $crate::inbox::sql::gates::sql_gates!($inbox);

            impl std::fmt::Debug for $inbox {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.debug_struct(stringify!($inbox))
                        .field("table", &self.sql.table)
                        .field("command_timeout", &self.command_timeout)
                        .finish_non_exhaustive()
                }
            }

            impl $inbox {
                /// The table's name.
                #[must_use]
                pub fn table(&self) -> &str {
                    &self.sql.table
                }

                /// The connection pool.
                #[must_use]
                pub fn pool(&self) -> &$pool {
                    &self.pool
                }

                /// Runs a token-checked statement bound with `lead` (if any)
                /// then the `text` values; applied when it matched a row.
                async fn transition(
                    &self,
                    statement: &str,
                    lead: Option<i64>,
                    text: &[&str],
                ) -> Result<Transition, InboxError> {
                    let mut query = sqlx::query(statement);
                    if let Some(value) = lead {
                        query = query.bind(value);
                    }
                    for value in text {
                        query = query.bind(*value);
                    }
                    let done = within(self.command_timeout, query.execute(&self.pool)).await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl $crate::inbox::TransactionalInbox for $inbox {
                type Database = $db;

                async fn begin(&self) -> Result<sqlx::Transaction<'static, $db>, InboxError> {
                    Ok(within(self.command_timeout, self.pool.begin()).await?)
                }

                async fn complete_in(
                    &self,
                    tx: &mut sqlx::Transaction<'static, $db>,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.complete)
                            .bind(key)
                            .bind(token.to_hex())
                            .execute(&mut **tx),
                    )
                    .await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl Inbox for $inbox {
                async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
                    Ok(within(self.command_timeout, self.accept_event(event)).await?)
                }

                async fn lease(
                    &self,
                    token: ClaimToken,
                    batch: u32,
                    lease: Duration,
                    max_attempts: u32,
                ) -> Result<Vec<LeasedEvent>, InboxError> {
                    let max = i64::from(max_attempts.max(1));
                    within(
                        self.command_timeout,
                        self.lease_events(token, i64::from(batch.max(1)), millis(lease), max),
                    )
                    .await
                    .map_err(InboxError::from)
                }

                async fn extend(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.extend,
                        Some(millis(lease)),
                        &[key, &token.to_hex()],
                    )
                    .await
                }

                async fn complete(
                    &self,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.complete, None, &[key, &token.to_hex()])
                        .await
                }

                async fn complete_many(
                    &self,
                    done: &[(&str, ClaimToken)],
                ) -> Result<Vec<Transition>, InboxError> {
                    if done.is_empty() {
                        return Ok(Vec::new());
                    }
                    Ok(within(self.command_timeout, self.complete_events(done)).await?)
                }

                async fn retry(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    delay: Duration,
                    error: &str,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.retry,
                        Some(millis(delay)),
                        &[truncate_error(error), key, &token.to_hex()],
                    )
                    .await
                }

                async fn release(
                    &self,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.release, None, &[key, &token.to_hex()])
                        .await
                }

                async fn dead_letter(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    error: &str,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.dead_letter,
                        None,
                        &[truncate_error(error), key, &token.to_hex()],
                    )
                    .await
                }

                async fn dead_letters(
                    &self,
                    filter: &DeadLetterFilter,
                ) -> Result<DeadLetterPage, InboxError> {
                    let (statement, params) = self.sql.list(filter);
                    let mut query = sqlx::query_as::<_, DeadRow>(&statement);
                    for param in params {
                        query = match param {
                            ListParam::Text(text) => query.bind(text),
                            ListParam::Int(int) => query.bind(int),
                        };
                    }
                    let rows = within(self.command_timeout, query.fetch_all(&self.pool)).await?;
                    let items: Vec<DeadLetter> = rows.into_iter().map(dead).collect();
                    let full = items.len() >= filter.page_size() as usize;
                    let next = items.last().filter(|_| full).map(|last| DeadLetterCursor {
                        received_at_ms: $crate::inbox::to_ms(last.meta.received_at),
                        key: last.meta.key.clone(),
                    });
                    let examined = items.len() as u64;
                    Ok(DeadLetterPage {
                        items,
                        next,
                        examined,
                    })
                }

                async fn dead_letter_get(
                    &self,
                    key: &str,
                ) -> Result<Option<DeadLetter>, InboxError> {
                    let row = within(
                        self.command_timeout,
                        sqlx::query_as::<_, DeadRow>(&self.sql.get)
                            .bind(key)
                            .fetch_optional(&self.pool),
                    )
                    .await?;
                    Ok(row.map(dead))
                }

                async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.replay, None, &[key]).await
                }

                async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
                    let done = self.transition(&self.sql.discard, None, &[key]).await?;
                    if done == Transition::Applied {
                        // Its attempt history: best effort (a purge deletes
                        // what is left).
                        let delete = $crate::inbox::sql::attempts::delete(&self.sql, self.sql.param);
                        if let Err(error) = within(
                            self.command_timeout,
                            sqlx::query(&delete).bind(key).execute(&self.pool),
                        )
                        .await
                        {
                            tracing::debug!(%error, "could not delete a discarded event's attempts");
                        }
                    }
                    Ok(done)
                }

                async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.purge)
                            .bind(millis(older_than))
                            .execute(&self.pool),
                    )
                    .await?;
                    // The activity counters past their retention: best
                    // effort (the table is missing until `migrate()` ran).
                    let prune = $crate::inbox::sql::activity_prune(&self.sql, ACTIVITY_MINUTE);
                    if let Err(error) = within(
                        self.command_timeout,
                        sqlx::query(&prune).execute(&self.pool),
                    )
                    .await
                    {
                        tracing::debug!(%error, "could not prune the inbox's activity counters");
                    }
                    // The attempts of the events no longer stored: best effort.
                    let attempts = $crate::inbox::sql::attempts::purge(
                        &self.sql,
                        self.sql.now,
                        self.sql.param,
                    );
                    if let Err(error) = within(
                        self.command_timeout,
                        sqlx::query(&attempts)
                            .bind(millis(older_than))
                            .execute(&self.pool),
                    )
                    .await
                    {
                        tracing::debug!(%error, "could not purge the inbox's attempt history");
                    }
                    Ok(done.rows_affected())
                }

                async fn record_attempts(
                    &self,
                    attempts: &[(&str, $crate::inbox::Attempt)],
                ) -> Result<(), InboxError> {
                    use $crate::inbox::sql::attempts as history;
                    if attempts.is_empty() {
                        return Ok(());
                    }
                    let param = self.sql.param;
                    let trims: Vec<&str> = attempts
                        .iter()
                        .filter(|(_, attempt)| history::needs_trim(attempt))
                        .map(|(key, _)| *key)
                        .collect();
                    let run = async {
                        // The common flush (first attempts that succeeded,
                        // one chunk) is one statement: no transaction of
                        // its own (one round trip, not three).
                        let alone = trims.is_empty() && attempts.len() <= history::INSERT_CHUNK;
                        if alone {
                            let statement = history::insert(&self.sql, param, attempts.len());
                            return history::bind(sqlx::query(&statement), attempts)
                                .execute(&self.pool)
                                .await
                                .map(|_| ());
                        }
                        let mut tx = self.pool.begin().await?;
                        for chunk in attempts.chunks(history::INSERT_CHUNK) {
                            let statement = history::insert(&self.sql, param, chunk.len());
                            history::bind(sqlx::query(&statement), chunk)
                                .execute(&mut *tx)
                                .await?;
                        }
                        if !trims.is_empty() {
                            let trim = history::trim(&self.sql, param);
                            for key in &trims {
                                sqlx::query(&trim).bind(*key).bind(*key).execute(&mut *tx).await?;
                            }
                        }
                        tx.commit().await
                    };
                    within(self.command_timeout, run).await?;
                    Ok(())
                }

                async fn attempts(
                    &self,
                    key: &str,
                ) -> Result<Vec<$crate::inbox::Attempt>, InboxError> {
                    use $crate::inbox::sql::attempts as history;
                    let select = history::select(&self.sql, self.sql.param);
                    let rows: Vec<history::AttemptRow> = within(
                        self.command_timeout,
                        sqlx::query_as(&select).bind(key).fetch_all(&self.pool),
                    )
                    .await?;
                    Ok(history::attempts(rows))
                }

                fn keeps_attempts(&self) -> bool {
                    true
                }

                async fn record_action(
                    &self,
                    action: &$crate::inbox::Action,
                ) -> Result<(), InboxError> {
                    use $crate::inbox::{actions, sql::actions as log};
                    let insert = log::insert(&self.sql, self.sql.param);
                    let trim = log::trim(&self.sql, self.sql.param);
                    let changed = i64::try_from(action.count).unwrap_or(i64::MAX);
                    within(self.command_timeout, async {
                        sqlx::query(&insert)
                            .bind(actions::at_ms(action))
                            .bind(action.who.as_str())
                            .bind(action.via.as_str())
                            .bind(action.kind.as_str())
                            .bind(action.target.as_str())
                            .bind(changed)
                            .execute(&self.pool)
                            .await?;
                        sqlx::query(&trim)
                            .bind(actions::cutoff_ms(action))
                            .execute(&self.pool)
                            .await
                    })
                    .await?;
                    Ok(())
                }

                async fn actions(
                    &self,
                    before: Option<u64>,
                    limit: u32,
                ) -> Result<$crate::inbox::ActionPage, InboxError> {
                    use $crate::inbox::{actions, sql::actions as log};
                    let limit = actions::page_size(limit);
                    let select = log::select(&self.sql, self.sql.param, limit + 1);
                    let before = before.map_or(i64::MAX, |id| i64::try_from(id).unwrap_or(i64::MAX));
                    let rows: Vec<log::ActionRow> = within(
                        self.command_timeout,
                        sqlx::query_as(&select).bind(before).fetch_all(&self.pool),
                    )
                    .await?;
                    let rows = rows
                        .into_iter()
                        .map(|(id, at, who, via, kind, target, changed)| {
                            actions::read(id, at, who, via, &kind, target, changed)
                        })
                        .collect();
                    Ok($crate::inbox::ActionPage::of(rows, limit))
                }

                fn keeps_actions(&self) -> bool {
                    true
                }

                async fn stats(&self) -> Result<InboxStats, InboxError> {
                    let (now, pending, due, oldest, in_flight, dead, completed, paused): (
                        i64,
                        i64,
                        i64,
                        Option<i64>,
                        i64,
                        i64,
                        i64,
                        i64,
                    ) = within(
                        self.command_timeout,
                        sqlx::query_as(&self.sql.stats).fetch_one(&self.pool),
                    )
                    .await?;
                    let count = |n: i64| u64::try_from(n).unwrap_or(0);
                    Ok(InboxStats {
                        pending: count(pending),
                        due: count(due),
                        oldest_due_age: oldest.map(|at| {
                            Duration::from_millis(
                                u64::try_from(now.saturating_sub(at)).unwrap_or(0),
                            )
                        }),
                        in_flight: count(in_flight),
                        dead: count(dead),
                        completed: count(completed),
                        paused: paused > 0,
                    })
                }

                async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
                    let flag = i64::from(paused);
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.set_paused)
                            .bind(flag)
                            .bind(flag)
                            .execute(&self.pool),
                    )
                    .await?;
                    let changed = done.rows_affected() > 0;
                    if !changed {
                        // Already so, or no control row (never migrated).
                        self.paused().await?;
                    }
                    $crate::inbox::signals::pause_set(paused, changed);
                    Ok(changed)
                }

                async fn set_gate_paused(
                    &self,
                    selector: &$crate::inbox::gates::Selector,
                    paused: bool,
                ) -> Result<bool, InboxError> {
                    let changed =
                        within(self.command_timeout, self.gate_set_paused(selector, paused))
                            .await?
                            .ok_or_else(|| {
                                InboxError::Protocol(format!(
                                    "the inbox holds {} gates already: resume one first",
                                    $crate::inbox::gates::MAX_GATES
                                ))
                            })?;
                    $crate::inbox::signals::gate_set(paused, changed);
                    Ok(changed)
                }

                async fn gates(&self) -> Result<Vec<$crate::inbox::gates::Gate>, InboxError> {
                    Ok(within(self.command_timeout, self.gate_list()).await?)
                }

                async fn acquire_permit(
                    &self,
                    selector: &$crate::inbox::gates::Selector,
                    limit: $crate::inbox::gates::Limit,
                    holder: &str,
                    hold: Duration,
                ) -> Result<$crate::inbox::gates::Permit, InboxError> {
                    Ok(within(
                        self.command_timeout,
                        self.permit_acquire(selector, limit, holder, hold),
                    )
                    .await?)
                }

                async fn release_permit(
                    &self,
                    selector: &$crate::inbox::gates::Selector,
                    holder: &str,
                ) -> Result<(), InboxError> {
                    Ok(within(self.command_timeout, self.permit_release(selector, holder)).await?)
                }

                async fn defer(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    delay: Duration,
                ) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.defer, Some(millis(delay)), &[key, &token.to_hex()])
                        .await
                }

                fn keeps_gates(&self) -> bool {
                    true
                }

                async fn paused(&self) -> Result<bool, InboxError> {
                    let row: Option<(i64,)> = within(
                        self.command_timeout,
                        sqlx::query_as(&self.sql.paused).fetch_optional(&self.pool),
                    )
                    .await?;
                    match row {
                        Some((flag,)) => Ok(flag != 0),
                        None => Err(InboxError::Protocol(format!(
                            "the inbox's control table {} has no row: run migrate()",
                            self.sql.control
                        ))),
                    }
                }

                async fn deliveries(
                    &self,
                    filter: &$crate::inbox::DeliveryFilter,
                ) -> Result<$crate::inbox::DeliveryPage, InboxError> {
                    let (statement, params) = self.sql.deliveries(filter);
                    let mut query =
                        sqlx::query_as::<_, $crate::inbox::sql::DeliveryRow>(&statement);
                    for param in params {
                        query = match param {
                            ListParam::Text(text) => query.bind(text),
                            ListParam::Int(int) => query.bind(int),
                        };
                    }
                    let rows = within(self.command_timeout, query.fetch_all(&self.pool)).await?;
                    let items: Vec<$crate::inbox::Delivery> =
                        rows.into_iter().map($crate::inbox::sql::delivery).collect();
                    let full = items.len() >= filter.page_size() as usize;
                    let next =
                        items
                            .last()
                            .filter(|_| full)
                            .map(|last| $crate::inbox::DeliveryCursor {
                                order: filter.order,
                                received_at_ms: $crate::inbox::to_ms(last.meta.received_at),
                                key: last.meta.key.clone(),
                            });
                    Ok($crate::inbox::DeliveryPage { items, next })
                }

                async fn delivery_get(
                    &self,
                    key: &str,
                ) -> Result<Option<$crate::inbox::Delivery>, InboxError> {
                    let row = within(
                        self.command_timeout,
                        sqlx::query_as::<_, $crate::inbox::sql::DeliveryRow>(
                            &self.sql.delivery_get,
                        )
                        .bind(key)
                        .fetch_optional(&self.pool),
                    )
                    .await?;
                    Ok(row.map($crate::inbox::sql::delivery))
                }

                async fn activity(
                    &self,
                    minutes: u32,
                ) -> Result<$crate::inbox::Activity, InboxError> {
                    let minutes = $crate::inbox::activity::clamp_minutes(minutes);
                    let statement = $crate::inbox::sql::activity_read(
                        &self.sql,
                        ACTIVITY_MINUTE,
                        DIALECT.int,
                        &(DIALECT.param)(1),
                    );
                    let rows: Vec<(i64, i64, i64)> = within(
                        self.command_timeout,
                        sqlx::query_as(&statement)
                            .bind(i64::from(minutes))
                            .fetch_all(&self.pool),
                    )
                    .await?;
                    let now = rows
                        .iter()
                        .find(|(_, kind, _)| *kind == 0)
                        .map(|(minute, _, _)| *minute)
                        .ok_or_else(|| {
                            InboxError::Protocol("the activity read returned no clock".into())
                        })?;
                    Ok($crate::inbox::Activity::from_rows(now, minutes, rows))
                }
                $($($own)*)?
            }
        };
    };
}
pub(crate) use sql_inbox;

/// The `accept_event` and `lease_events` of a backend with
/// `INSERT … ON CONFLICT DO NOTHING` and `UPDATE … RETURNING` (PostgreSQL, SQLite).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! returning_ops {
    ($inbox:ident) => {
        impl $inbox {
            async fn accept_event(
                &self,
                event: &$crate::inbox::NewEvent,
            ) -> Result<$crate::inbox::Accepted, sqlx::Error> {
                let statement = format!("{} ON CONFLICT (event_key) DO NOTHING", self.sql.accept);
                let done = sqlx::query(&statement)
                    .bind(event.stored_key())
                    .bind(&event.scheme)
                    .bind(&event.delivery_id)
                    .bind(&event.event_type)
                    .bind(&event.matched_key)
                    .bind($crate::inbox::encode_headers(&event.headers))
                    .bind(event.body.as_ref())
                    .bind(event.signed_at.and_then(|s| i64::try_from(s).ok()))
                    .execute(&self.pool)
                    .await?;
                Ok(if done.rows_affected() > 0 {
                    $crate::inbox::Accepted::Stored
                } else {
                    $crate::inbox::Accepted::Duplicate
                })
            }

            async fn lease_events(
                &self,
                token: $crate::inbox::ClaimToken,
                batch: i64,
                lease_ms: i64,
                max_attempts: i64,
            ) -> Result<Vec<$crate::inbox::LeasedEvent>, sqlx::Error> {
                let mut lease = sqlx::query_as(&self.sql.lease)
                    .bind(token.to_hex())
                    .bind(lease_ms)
                    .bind(max_attempts)
                    .bind(batch);
                if DIALECT.reap_in_lease {
                    lease = lease.bind($crate::inbox::EXPIRED_ON_LAST_ATTEMPT);
                } else {
                    sqlx::query(&self.sql.reap)
                        .bind($crate::inbox::EXPIRED_ON_LAST_ATTEMPT)
                        .bind(max_attempts)
                        .execute(&self.pool)
                        .await?;
                }
                let rows: Vec<$crate::inbox::sql::LeaseRow> = lease.fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|row| $crate::inbox::sql::leased(row, token))
                    .collect())
            }
        }
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use returning_ops;
