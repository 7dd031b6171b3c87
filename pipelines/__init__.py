"""perflake's library: configuration, planning, landing, mining, SQL, reports, CLI."""
