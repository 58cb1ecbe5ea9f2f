package scylla

// The statements of the package, each with its class (consistency.go,
// docs/storage.md). gocql prepares each distinct query string once per
// connection and caches it, so these are the prepared statements; never
// build a statement with values spliced in.
//
// USING TIMESTAMP values come from timestamps.go; see there and doc.go for
// why each one is what it is.
var (
	// Router record (static columns of the user's router partition).
	qGetUser = read(`SELECT router_type, router_data, node_id, connected_at, last_connect, cursor
		FROM router WHERE uaid = ? LIMIT 1`)
	qConnectState = read(`SELECT connected_at, channels_refreshed, cursor, WRITETIME(cursor)
		FROM router WHERE uaid = ? LIMIT 1`)
	// Reconnect's read: the record as GetUser reads it and what Connect
	// reads.
	qReconnectState = read(`SELECT router_type, router_data, node_id, connected_at, last_connect, cursor,
		channels_refreshed, WRITETIME(cursor) FROM router WHERE uaid = ? LIMIT 1`)
	qConnect = routerWrite(`UPDATE router USING TIMESTAMP ? AND TTL ?
		SET router_type = ?, router_data = ?, node_id = ?, connected_at = ?, last_connect = ?
		WHERE uaid = ?`)
	// A new user's record: Connect's cells and the refresh mark (it has
	// no channels to refresh yet).
	qConnectNew = routerWrite(`UPDATE router USING TIMESTAMP ? AND TTL ?
		SET router_type = ?, router_data = ?, node_id = ?, connected_at = ?, last_connect = ?, channels_refreshed = ?
		WHERE uaid = ?`)
	qClearNode     = routerWrite(`DELETE node_id FROM router USING TIMESTAMP ? WHERE uaid = ?`)
	qAdvanceCursor = messageWrite(`UPDATE router USING TIMESTAMP ? AND TTL ? SET cursor = ? WHERE uaid = ?`)
	qMarkRefreshed = routerWrite(`UPDATE router USING TTL ? SET channels_refreshed = ? WHERE uaid = ?`)
	qDropRouter    = routerWrite(`DELETE FROM router USING TIMESTAMP ? WHERE uaid = ?`)
	qHealth        = read(`SELECT connected_at FROM router WHERE uaid = ? LIMIT 1`)

	// Channels (clustering rows of the router partition).
	qAddChannel     = routerWrite(`INSERT INTO router (uaid, chid) VALUES (?, ?) USING TTL ?`)
	qRefreshChannel = routerWrite(`INSERT INTO router (uaid, chid) VALUES (?, ?) USING TIMESTAMP ? AND TTL ?`)
	qRemoveChannel  = routerWrite(`DELETE FROM router WHERE uaid = ? AND chid = ?`)
	qChannels       = read(`SELECT chid FROM router WHERE uaid = ?`)
	qHasChannel     = read(`SELECT chid FROM router WHERE uaid = ? AND chid = ?`)
	// The router record's static columns with the channel's row; no row
	// when either is missing (Cassandra 5 returns no statics without the
	// clustering row).
	qSubscription = read(`SELECT router_type, router_data, node_id, connected_at, last_connect, cursor, chid
		FROM router WHERE uaid = ? AND chid = ?`)
	qCountChannels = read(`SELECT chid FROM router WHERE uaid = ? LIMIT ?`)

	// Messages.
	// tracked is written on every save, false too: a newer topic
	// version replaces an older one's cell.
	qSaveMessage = messageWrite(`INSERT INTO message
		(uaid, kind, sortkey, chid, topic, received, version, ttl, data, headers, tracked)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?`)
	qDeleteMessage = messageWrite(`DELETE FROM message USING TIMESTAMP ?
		WHERE uaid = ? AND kind = ? AND sortkey = ? AND chid = ? AND topic = ?`)
	qDropMessages = messageWrite(`DELETE FROM message USING TIMESTAMP ? WHERE uaid = ?`)
	// tracked is null in rows saved before the column: read as false.
	qTopicMessages = read(`SELECT chid, topic, received, version, ttl, data, headers, tracked
		FROM message WHERE uaid = ? AND kind = 1`)
	qTimestampMessages = read(`SELECT sortkey, chid, version, ttl, data, headers, tracked
		FROM message WHERE uaid = ? AND kind = 2 AND sortkey > ? LIMIT ?`)
)

// The schema check of New, on a session of its own (not a Store's).
const qTables = `SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`

// Values of message.kind.
const (
	kindTopic     int8 = 1
	kindTimestamp int8 = 2
)
