"""Transfer records' references checked once per statement, not once per row and key (issue #37).

A foreign key checks each inserted row on its own (a SELECT ... FOR KEY SHARE per row and key): six of them were the
largest cost of storing a batch of 5,000 records. They become triggers that keep the same guarantee:
- a statement that inserts records (a batch's INSERT, a run's record, any other writer) checks the distinct ids of
  its rows once, against sites_experiment, sites_site, sites_storageendpoint and runs_run, and locks the rows found
  FOR KEY SHARE as a foreign key does (so none of them is deleted before the records commit); an id that is not
  there refuses the whole statement with SQLSTATE 23503 (foreign_key_violation, Django's IntegrityError);
- an UPDATE that changes a record's reference checks the new one (a row trigger that fires only then);
- deleting or truncating an experiment, a site, an endpoint or a run that records still name is refused the same way
  (Django's on_delete, PROTECT or SET_NULL, acts before, as it did with the foreign keys).
The checks are immediate (at the end of the statement) where the foreign keys were deferred to the commit: every
writer stores records after what they name exists, and results.services checked them immediately already.

The index on source_site_id alone goes: (source_site_id, destination_site_id, "end") serves every read of it.
"""

import django.db.models.deletion
from django.db import migrations, models

RECORDS = "results_transferrecord"

# (column, referenced table) of every reference a record holds but its activity (which has none by design:
# results.store.attribution re-attributes the records of an activity that goes).
REFERENCES = (
    ("experiment_id", "sites_experiment"),
    ("source_site_id", "sites_site"),
    ("destination_site_id", "sites_site"),
    ("source_endpoint_id", "sites_storageendpoint"),
    ("destination_endpoint_id", "sites_storageendpoint"),
    ("run_id", "runs_run"),
)

DROP_FOREIGN_KEYS = f"""
DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT conname FROM pg_constraint WHERE conrelid = '{RECORDS}'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE {RECORDS} DROP CONSTRAINT %I', name);
    END LOOP;
END $$;
DROP INDEX IF EXISTS results_transferrecord_source_site_id_03241935;
"""

# Going back: the foreign keys as Django made them (names from 0001/0014), checked against the stored records.
ADD_FOREIGN_KEYS = f"""
CREATE INDEX results_transferrecord_source_site_id_03241935 ON {RECORDS} (source_site_id);
ALTER TABLE {RECORDS}
    ADD CONSTRAINT results_transferreco_experiment_id_59363f6f_fk_sites_exp FOREIGN KEY (experiment_id)
        REFERENCES sites_experiment (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT results_transferrecord_source_site_id_03241935_fk_sites_site_id FOREIGN KEY (source_site_id)
        REFERENCES sites_site (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT results_transferreco_destination_site_id_e27c7105_fk_sites_sit FOREIGN KEY (destination_site_id)
        REFERENCES sites_site (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT results_transferreco_source_endpoint_id_fcf5713e_fk_sites_sto FOREIGN KEY (source_endpoint_id)
        REFERENCES sites_storageendpoint (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT results_transferreco_destination_endpoint_3fbf81d3_fk_sites_sto
        FOREIGN KEY (destination_endpoint_id) REFERENCES sites_storageendpoint (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT results_transferrecord_run_id_c6baa2ee_fk_challenges_run_id FOREIGN KEY (run_id)
        REFERENCES runs_run (id) DEFERRABLE INITIALLY DEFERRED;
"""

TRIGGERS = f"""
-- The ids of one referenced table that records are about to hold: refused (23503) unless all exist; those found are
-- locked FOR KEY SHARE until the commit, as a foreign key locks them.
CREATE FUNCTION results_record_refs_check(wanted bigint[], target text, columns text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE found bigint[]; missing bigint;
BEGIN
    IF wanted IS NULL OR cardinality(wanted) = 0 THEN
        RETURN;
    END IF;
    IF cardinality(wanted) > 1 THEN
        wanted := array(SELECT DISTINCT id FROM unnest(wanted) AS id);
    END IF;
    EXECUTE format('SELECT array(SELECT id FROM (SELECT id FROM %I WHERE id = ANY($1) FOR KEY SHARE) AS locked)',
                   target)
        INTO found USING wanted;
    IF cardinality(found) = cardinality(wanted) THEN
        RETURN;
    END IF;
    SELECT min(id) INTO missing FROM unnest(wanted) AS id WHERE id <> ALL(found);
    RAISE EXCEPTION 'insert or update on table "{RECORDS}": % = % is not present in table "%"', columns, missing,
        target
        USING ERRCODE = 'foreign_key_violation', TABLE = '{RECORDS}';
END $$;

-- After a statement that inserted records: the distinct ids of its rows, one check per referenced table.
CREATE FUNCTION results_record_refs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    experiments bigint[]; sources bigint[]; destinations bigint[]; source_doors bigint[];
    destination_doors bigint[]; runs bigint[];
BEGIN
    SELECT array_agg(DISTINCT experiment_id) FILTER (WHERE experiment_id IS NOT NULL),
           array_agg(DISTINCT source_site_id) FILTER (WHERE source_site_id IS NOT NULL),
           array_agg(DISTINCT destination_site_id) FILTER (WHERE destination_site_id IS NOT NULL),
           array_agg(DISTINCT source_endpoint_id) FILTER (WHERE source_endpoint_id IS NOT NULL),
           array_agg(DISTINCT destination_endpoint_id) FILTER (WHERE destination_endpoint_id IS NOT NULL),
           array_agg(DISTINCT run_id) FILTER (WHERE run_id IS NOT NULL)
    INTO experiments, sources, destinations, source_doors, destination_doors, runs
    FROM inserted_records;
    PERFORM results_record_refs_check(experiments, 'sites_experiment', 'experiment_id');
    PERFORM results_record_refs_check(sources || destinations, 'sites_site', 'source_site_id/destination_site_id');
    PERFORM results_record_refs_check(source_doors || destination_doors, 'sites_storageendpoint',
                                      'source_endpoint_id/destination_endpoint_id');
    PERFORM results_record_refs_check(runs, 'runs_run', 'run_id');
    RETURN NULL;
END $$;

-- A row whose references an UPDATE changed (the trigger fires only for those).
CREATE FUNCTION results_record_refs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM results_record_refs_check(array_remove(ARRAY[NEW.experiment_id], NULL), 'sites_experiment',
                                      'experiment_id');
    PERFORM results_record_refs_check(array_remove(ARRAY[NEW.source_site_id, NEW.destination_site_id], NULL),
                                      'sites_site', 'source_site_id/destination_site_id');
    PERFORM results_record_refs_check(array_remove(ARRAY[NEW.source_endpoint_id, NEW.destination_endpoint_id], NULL),
                                      'sites_storageendpoint', 'source_endpoint_id/destination_endpoint_id');
    PERFORM results_record_refs_check(array_remove(ARRAY[NEW.run_id], NULL), 'runs_run', 'run_id');
    RETURN NULL;
END $$;

-- After a statement that deleted rows of a referenced table (TG_ARGV: the records' columns that name it), or
-- truncated it: refused while a record still names one of them. Each column has an index that leads with it.
CREATE FUNCTION results_record_refs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE column_name text; held bigint;
BEGIN
    FOREACH column_name IN ARRAY TG_ARGV LOOP
        IF TG_OP = 'TRUNCATE' THEN
            EXECUTE format('SELECT %I FROM {RECORDS} WHERE %I IS NOT NULL LIMIT 1', column_name, column_name)
                INTO held;
        ELSE
            EXECUTE format('SELECT r.%I FROM {RECORDS} AS r WHERE r.%I IN (SELECT id FROM deleted_rows) LIMIT 1',
                           column_name, column_name)
                INTO held;
        END IF;
        IF held IS NOT NULL THEN
            RAISE EXCEPTION 'update or delete on table "%" violates the references of table "{RECORDS}"',
                TG_TABLE_NAME
                USING ERRCODE = 'foreign_key_violation',
                      DETAIL = format('Key (id)=(%s) is still referenced from table "{RECORDS}" (%s).', held,
                                      column_name);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER results_record_refs_inserted AFTER INSERT ON {RECORDS}
    REFERENCING NEW TABLE AS inserted_records FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_inserted();
CREATE TRIGGER results_record_refs_updated AFTER UPDATE ON {RECORDS} FOR EACH ROW
    WHEN (NEW.experiment_id IS DISTINCT FROM OLD.experiment_id
          OR NEW.source_site_id IS DISTINCT FROM OLD.source_site_id
          OR NEW.destination_site_id IS DISTINCT FROM OLD.destination_site_id
          OR NEW.source_endpoint_id IS DISTINCT FROM OLD.source_endpoint_id
          OR NEW.destination_endpoint_id IS DISTINCT FROM OLD.destination_endpoint_id
          OR NEW.run_id IS DISTINCT FROM OLD.run_id)
    EXECUTE FUNCTION results_record_refs_updated();

CREATE TRIGGER results_record_refs_deleted AFTER DELETE ON sites_experiment REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('experiment_id');
CREATE TRIGGER results_record_refs_deleted AFTER DELETE ON sites_site REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('source_site_id', 'destination_site_id');
CREATE TRIGGER results_record_refs_deleted AFTER DELETE ON sites_storageendpoint
    REFERENCING OLD TABLE AS deleted_rows FOR EACH STATEMENT
    EXECUTE FUNCTION results_record_refs_deleted('source_endpoint_id', 'destination_endpoint_id');
CREATE TRIGGER results_record_refs_deleted AFTER DELETE ON runs_run REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('run_id');
CREATE TRIGGER results_record_refs_truncated AFTER TRUNCATE ON sites_experiment
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('experiment_id');
CREATE TRIGGER results_record_refs_truncated AFTER TRUNCATE ON sites_site
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('source_site_id', 'destination_site_id');
CREATE TRIGGER results_record_refs_truncated AFTER TRUNCATE ON sites_storageendpoint FOR EACH STATEMENT
    EXECUTE FUNCTION results_record_refs_deleted('source_endpoint_id', 'destination_endpoint_id');
CREATE TRIGGER results_record_refs_truncated AFTER TRUNCATE ON runs_run
    FOR EACH STATEMENT EXECUTE FUNCTION results_record_refs_deleted('run_id');
"""

DROP_TRIGGERS = f"""
DROP TRIGGER results_record_refs_inserted ON {RECORDS};
DROP TRIGGER results_record_refs_updated ON {RECORDS};
DROP TRIGGER results_record_refs_deleted ON sites_experiment;
DROP TRIGGER results_record_refs_deleted ON sites_site;
DROP TRIGGER results_record_refs_deleted ON sites_storageendpoint;
DROP TRIGGER results_record_refs_deleted ON runs_run;
DROP TRIGGER results_record_refs_truncated ON sites_experiment;
DROP TRIGGER results_record_refs_truncated ON sites_site;
DROP TRIGGER results_record_refs_truncated ON sites_storageendpoint;
DROP TRIGGER results_record_refs_truncated ON runs_run;
DROP FUNCTION results_record_refs_inserted();
DROP FUNCTION results_record_refs_updated();
DROP FUNCTION results_record_refs_deleted();
DROP FUNCTION results_record_refs_check(bigint[], text, text);
"""


def _reference(to: str, on_delete, **options) -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        null=True,
        on_delete=on_delete,
        related_name=options.pop("related_name", "+"),
        to=to,
        db_constraint=False,
        **options,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0019_network_measurements"),
        ("runs", "0005_run_credential"),
        ("sites", "0003_storageendpoint_experiments"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(DROP_FOREIGN_KEYS, ADD_FOREIGN_KEYS),
                migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="transferrecord",
                    name="experiment",
                    field=_reference("sites.experiment", django.db.models.deletion.PROTECT, db_index=False),
                ),
                migrations.AlterField(
                    model_name="transferrecord",
                    name="source_site",
                    field=_reference("sites.site", django.db.models.deletion.PROTECT, db_index=False),
                ),
                migrations.AlterField(
                    model_name="transferrecord",
                    name="destination_site",
                    field=_reference("sites.site", django.db.models.deletion.PROTECT),
                ),
                migrations.AlterField(
                    model_name="transferrecord",
                    name="source_endpoint",
                    field=_reference("sites.storageendpoint", django.db.models.deletion.SET_NULL),
                ),
                migrations.AlterField(
                    model_name="transferrecord",
                    name="destination_endpoint",
                    field=_reference("sites.storageendpoint", django.db.models.deletion.SET_NULL),
                ),
                migrations.AlterField(
                    model_name="transferrecord",
                    name="run",
                    field=_reference(
                        "runs.run", django.db.models.deletion.SET_NULL, db_index=False, related_name="records"
                    ),
                ),
            ],
        ),
    ]
