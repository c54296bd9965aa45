"""The logical tables the compat pipeline's workloads and tests create, and their column names
in order."""

COLUMNS = {
    ("bank", "accounts"): ["id", "balance", "updated_at"],
    ("shop", "customers"): [
        "id",
        "name",
        "tier",
        "balance",
        "orders",
        "birthday",
        "created_at",
        "note",
    ],
    ("shop", "orders"): [
        "customer_id",
        "id",
        "amount",
        "qty",
        "status",
        "title",
        "created_at",
        "updated_at",
        "ship_date",
        "payload",
    ],
    ("shop", "order_events"): ["id", "batch", "kind", "at"],
    ("shop", "currencies"): ["code", "rate", "updated_at"],
    # test_connector_j_fetch.py's (it runs before the tests that read every rows event)
    ("jdbc", "rows_of_a_table"): ["id", "a", "amount", "f", "pad", "at", "d", "t"],
}
