//! The macros that define the SQL stores: `sql_store!` (the store, its
//! builder and everything the backends share) and `claim_returning!`.

/// Defines a SQL store and its builder, with everything the backends share:
/// the builder's settings, the constructors and accessors, the token-checked
/// `complete` / `release` / `extend`, `purge_expired` and `spawn_purge`, and
/// the [`DedupStore`](crate::dedup::DedupStore) impl.
///
/// The backend's module supplies the rest: `fn statements(table: &str) ->
/// Statements<claim type>` (named by `statements`), the builder's `connect`
/// (which ends with `self.open(pool)`), the store's `migrate`, and
/// `claim_row` (the claim, without its timeout; see `claim_returning`). The
/// docs of the items whose wording differs between backends are given here,
/// in this order.
macro_rules! sql_store {
    (
        $(#[$store_doc:meta])*
        pub struct $store:ident {
            pool: $pool:ty,
            claim: $claim:ty,
            statements: $statements:path,
            backend: $backend:literal,
        }

        $(#[$builder_doc:meta])*
        pub struct $builder:ident {
            max_connections: $max:literal,
            command_timeout_secs: $command_secs:literal,
            debug: $debug:ident,
        }

        $(#[$builder_fn_doc:meta])* fn builder;
        $(#[$connect_fn_doc:meta])* fn connect;
        $(#[$new_doc:meta])* fn new;
        $(#[$connect_timeout_doc:meta])* fn connect_timeout;
        $(#[$command_timeout_doc:meta])* fn command_timeout;
        $(#[$max_connections_doc:meta])* fn max_connections;
        $(#[$purge_doc:meta])* fn purge_expired;
    ) => {
        $(#[$store_doc])*
        #[derive(Clone)]
        pub struct $store {
            pool: $pool,
            sql: ::std::sync::Arc<$crate::dedup::sql::Statements<$claim>>,
            command_timeout: ::std::time::Duration,
            /// One permit per pooled connection: operations queue here, in
            /// order, within `queue_timeout`.
            slots: ::std::sync::Arc<::tokio::sync::Semaphore>,
            queue_timeout: ::std::time::Duration,
        }

        $(#[$builder_doc])*
        #[derive(Clone)]
        #[must_use]
        pub struct $builder {
            url: String,
            settings: $crate::dedup::sql::SqlSettings,
        }

        $crate::dedup::sql::sql_store!(@debug $debug $builder);

        // The impls, in a block for the imports they share.
        const _: () = {
            use std::fmt;
            use std::sync::Arc;
            use std::time::Duration;

            use $crate::ConfigError;
            use $crate::dedup::sql::{
                DEFAULT_CONNECT_TIMEOUT, DEFAULT_PURGE_BATCH,
                DEFAULT_QUEUE_TIMEOUT, DEFAULT_TABLE, PurgeTask, RowKey, SqlSettings, span_ms, validate_table, within,
            };
            use $crate::dedup::{Claim, ClaimToken, DedupStore, OpenError, StoreError, Transition};

            impl fmt::Debug for $store {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.debug_struct(stringify!($store))
                        .field("table", &self.sql.table)
                        .field("command_timeout", &self.command_timeout)
                        .field("queue_timeout", &self.queue_timeout)
                        .field("pool_size", &self.pool.size())
                        .finish_non_exhaustive()
                }
            }

            impl $builder {
                /// The table's name (default [`DEFAULT_TABLE`](crate::dedup::sql::DEFAULT_TABLE)); checked by
                /// [`connect`](Self::connect) to be a plain identifier.
                pub fn table(mut self, name: impl Into<String>) -> Self {
                    self.settings.table = name.into();
                    self
                }

                $(#[$connect_timeout_doc])*
                pub fn connect_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.connect_timeout = timeout;
                    self
                }

                $(#[$command_timeout_doc])*
                pub fn command_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.command_timeout = timeout;
                    self
                }

                $(#[$max_connections_doc])*
                pub fn max_connections(mut self, max: u32) -> Self {
                    self.settings.max_connections = max.max(1);
                    self
                }

                /// How long an operation may wait for a free connection while
                /// every pooled one is busy (default 30 s, sqlx's own default),
                /// answering [`StoreError::Timeout`](crate::dedup::StoreError::Timeout)
                /// after it. Operations queue in order; this wait counts neither
                /// towards the command timeout (a burst queueing for the pool
                /// does not time out statements that run fast) nor towards the
                /// connect timeout (an unreachable database still fails within
                /// it once an operation's turn comes).
                pub fn queue_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.queue_timeout = timeout;
                    self
                }

                /// The store on the pool `connect` opens, within the connect timeout.
                async fn open(
                    &self,
                    connect: impl Future<Output = Result<$pool, sqlx::Error>>,
                ) -> Result<$store, OpenError> {
                    let pool = within(self.settings.connect_timeout, connect).await?;
                    Ok($store::from_parts(pool, &self.settings.table, self.settings.command_timeout)
                        .with_queue_timeout(self.settings.queue_timeout))
                }
            }

            impl $store {
                #[doc = concat!("Default of [`", stringify!($builder), "::connect_timeout`]: 5 seconds.")]
                pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
                #[doc = concat!("Default of [`", stringify!($builder), "::command_timeout`]: ", stringify!($command_secs), " seconds.")]
                pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs($command_secs);
                #[doc = concat!("Default of [`", stringify!($builder), "::queue_timeout`]: 30 seconds.")]
                pub const DEFAULT_QUEUE_TIMEOUT: Duration = DEFAULT_QUEUE_TIMEOUT;

                $(#[$builder_fn_doc])*
                pub fn builder(url: &str) -> $builder {
                    $builder {
                        url: url.to_owned(),
                        settings: SqlSettings::new($max, Self::DEFAULT_COMMAND_TIMEOUT),
                    }
                }

                $(#[$connect_fn_doc])*
                pub async fn connect(url: &str) -> Result<Self, OpenError> {
                    Self::builder(url).connect().await
                }

                $(#[$new_doc])*
                #[must_use]
                pub fn new(pool: $pool) -> Self {
                    Self::from_parts(pool, DEFAULT_TABLE, Self::DEFAULT_COMMAND_TIMEOUT)
                }

                fn from_parts(pool: $pool, table: &str, command_timeout: Duration) -> Self {
                    let slots = usize::try_from(pool.options().get_max_connections())
                        .unwrap_or(usize::MAX)
                        .clamp(1, ::tokio::sync::Semaphore::MAX_PERMITS);
                    Self {
                        pool,
                        sql: Arc::new($statements(table)),
                        command_timeout,
                        slots: Arc::new(::tokio::sync::Semaphore::new(slots)),
                        queue_timeout: DEFAULT_QUEUE_TIMEOUT,
                    }
                }

                /// Lets an operation wait `timeout` for a free connection instead
                #[doc = concat!("(see [`", stringify!($builder), "::queue_timeout`]).")]
                #[must_use]
                pub fn with_queue_timeout(mut self, timeout: Duration) -> Self {
                    self.queue_timeout = timeout;
                    self
                }

                /// Uses the table `name` instead.
                ///
                /// # Errors
                ///
                /// [`ConfigError::Invalid`](crate::ConfigError::Invalid) unless `name` is a plain identifier.
                pub fn with_table(mut self, name: &str) -> Result<Self, ConfigError> {
                    validate_table(name)?;
                    self.sql = Arc::new($statements(name));
                    Ok(self)
                }

                /// Bounds every operation by `timeout` instead.
                #[must_use]
                pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
                    self.command_timeout = timeout;
                    self
                }

                /// The connection pool.
                #[must_use]
                pub fn pool(&self) -> &$pool {
                    &self.pool
                }

                /// The table's name.
                #[must_use]
                pub fn table(&self) -> &str {
                    &self.sql.table
                }

                $(#[$purge_doc])*
                pub async fn purge_expired(&self, batch: u32) -> Result<u64, StoreError> {
                    let batch = batch.max(1);
                    let mut total = 0;
                    loop {
                        let (_turn, mut connection) = self.connection().await?;
                        let deleted = within(
                            self.command_timeout,
                            sqlx::query(&self.sql.purge)
                                .bind(i64::from(batch))
                                .execute(&mut *connection),
                        )
                        .await?
                        .rows_affected();
                        total += deleted;
                        if deleted < u64::from(batch) {
                            return Ok(total);
                        }
                    }
                }

                /// Runs [`purge_expired`](Self::purge_expired) every `interval` in a
                /// background task (batches of 1000), until the returned handle is dropped.
                /// Failures are logged (`tracing`), never fatal.
                ///
                /// # Panics
                ///
                /// Outside a Tokio runtime.
                pub fn spawn_purge(&self, interval: Duration) -> PurgeTask {
                    let store = self.clone();
                    PurgeTask::spawn(interval, $backend, move || {
                        let store = store.clone();
                        async move { store.purge_expired(DEFAULT_PURGE_BATCH).await }
                    })
                }

                /// A pooled connection: first this operation's turn (one
                /// permit per connection, in order, within the queue
                /// timeout), then the connection, within the pool's acquire
                /// timeout (the builder's `connect_timeout`). Neither wait is
                /// part of the command timeout.
                async fn connection(
                    &self,
                ) -> Result<
                    (
                        ::tokio::sync::OwnedSemaphorePermit,
                        sqlx::pool::PoolConnection<<$pool as $crate::dedup::sql::PoolDatabase>::Database>,
                    ),
                    StoreError,
                > {
                    let turn = ::tokio::time::timeout(
                        self.queue_timeout,
                        Arc::clone(&self.slots).acquire_owned(),
                    );
                    let permit = match turn.await {
                        Ok(Ok(permit)) => permit,
                        Ok(Err(_closed)) => {
                            return Err(StoreError::Protocol("connection queue closed".into()));
                        }
                        Err(_) => return Err(StoreError::Timeout),
                    };
                    let connection = self
                        .pool
                        .acquire()
                        .await
                        .map_err($crate::dedup::sql::store_error)?;
                    Ok((permit, connection))
                }

                /// The database's clock, in epoch milliseconds.
                async fn database_now_ms(&self) -> Result<i64, StoreError> {
                    let (_turn, mut connection) = self.connection().await?;
                    let select = format!("SELECT {}", self.sql.now);
                    within(
                        self.command_timeout,
                        sqlx::query_scalar::<_, i64>(&select).fetch_one(&mut *connection),
                    )
                    .await
                }

                /// How far the database's clock is ahead of this host's (negative:
                /// behind), measured by one query (half its round trip is
                /// counted as the database's answer time).
                ///
                /// Leases do not depend on it (they use the database's clock),
                /// but the signature schemes' timestamp tolerance uses this
                /// host's clock: a large skew is worth an alert.
                ///
                /// # Errors
                ///
                /// [`StoreError`] when the database cannot answer.
                pub async fn clock_skew_ms(&self) -> Result<i64, StoreError> {
                    let before = $crate::dedup::sql::now_ms();
                    let database = self.database_now_ms().await?;
                    let after = $crate::dedup::sql::now_ms();
                    Ok(database - (before + (after - before) / 2))
                }

                /// Runs one of the token-checked statements, binding the span
                /// from now (if any), the key and the token; applied when it
                /// matched the row.
                async fn token_update(
                    &self,
                    statement: &str,
                    key: &str,
                    token: ClaimToken,
                    span: Option<Duration>,
                ) -> Result<Transition, StoreError> {
                    let key = RowKey::new(key);
                    let mut query = sqlx::query(statement);
                    if let Some(span) = span {
                        query = query.bind(span_ms(span));
                    }
                    let query = query
                        .bind(key.namespace)
                        .bind(key.id)
                        .bind(token.to_hex());
                    let (_turn, mut connection) = self.connection().await?;
                    let done = within(self.command_timeout, query.execute(&mut *connection)).await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl DedupStore for $store {
                async fn claim(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Claim, StoreError> {
                    let key = RowKey::new(key);
                    let mine = token.to_hex();
                    let (_turn, mut connection) = self.connection().await?;
                    within(
                        self.command_timeout,
                        self.claim_row(&mut connection, &key, &mine, span_ms(lease)),
                    )
                    .await?
                    .outcome()
                }

                async fn complete(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    retention: Duration,
                ) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.complete, key, token, Some(retention)).await
                }

                async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.release, key, token, None).await
                }

                async fn extend(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.extend, key, token, Some(lease)).await
                }
            }
        };
    };
    // The builder's `Debug`: `redacted` leaves the URL out (it may hold a
    // password); `derived` is the builder's own `#[derive(Debug)]`.
    (@debug derived $builder:ident) => {};
    (@debug redacted $builder:ident) => {
        impl ::std::fmt::Debug for $builder {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($builder))
                    .field("settings", &self.settings)
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use sql_store;

/// The `claim_row` of a backend whose claim is one
/// `INSERT … RETURNING state, token, expires_at, now` statement (PostgreSQL,
/// SQLite) on a connection of database `$db`, bound with namespace, id,
/// token and the lease (ms); `$state` is the type the `state` column decodes to.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! claim_returning {
    ($store:ident, $db:ty, $state:ty) => {
        impl $store {
            async fn claim_row(
                &self,
                connection: &mut ::sqlx::pool::PoolConnection<$db>,
                key: &$crate::dedup::sql::RowKey,
                token: &str,
                lease_ms: i64,
            ) -> Result<$crate::dedup::sql::ClaimedRow, ::sqlx::Error> {
                let (state, held, expires_at, now): ($state, String, i64, i64) =
                    ::sqlx::query_as(&self.sql.claim)
                        .bind(&key.namespace)
                        .bind(&key.id)
                        .bind(token)
                        .bind(lease_ms)
                        .fetch_one(&mut **connection)
                        .await?;
                let holds = held == token;
                Ok($crate::dedup::sql::ClaimedRow::new(
                    now, state, holds, expires_at,
                ))
            }
        }
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use claim_returning;
