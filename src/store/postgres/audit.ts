// The PostgreSQL store's audit tree (docs/audit.md). Every append is one statement that updates
// the `head` counter and inserts its rows (append.ts), so the tree is kept by triggers on that
// statement, in its transaction and under the counter's row lock, with no round trip of its own:
// a BEFORE ROW trigger writes each row's leaf hash (the bytes of src/core/audit/leaf.ts, built in
// SQL), and an AFTER STATEMENT trigger folds the statement's new leaves, in position order, into
// the frontier kept in `audit_head` and writes the root. Positions are dense here (append.ts), so
// dense_from is 1.

/** Schema v2: the leaf column, the head row, the triggers, and the tree over the events already stored. */
export const auditSchemaV2 = (s: string): string => `
ALTER TABLE ${s}.events ADD COLUMN leaf bytea;
CREATE TABLE ${s}.audit_head (
  only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  size       bigint  NOT NULL,
  root       bytea   NOT NULL,
  -- frontier[i] is the root of the perfect subtree of 2^(i-1) leaves when that bit of size is set.
  frontier   bytea[] NOT NULL,
  dense_from bigint  NOT NULL
);
INSERT INTO ${s}.audit_head (size, root, frontier, dense_from) VALUES (0, sha256(''::bytea), '{}', 1);

CREATE FUNCTION ${s}.audit_sized(b bytea) RETURNS bytea IMMUTABLE LANGUAGE sql AS $$
  SELECT int4send(octet_length(b)) || b
$$;
CREATE FUNCTION ${s}.audit_leaf(p bigint, stream text, revision bigint, type text, data text, metadata text)
RETURNS bytea IMMUTABLE LANGUAGE sql AS $$
  SELECT sha256('\\x0002'::bytea || int8send(p) || ${s}.audit_sized(convert_to(stream, 'UTF8')) || int8send(revision)
    || ${s}.audit_sized(convert_to(type, 'UTF8')) || ${s}.audit_sized(convert_to(data, 'UTF8'))
    || ${s}.audit_sized(convert_to(metadata, 'UTF8')))
$$;
CREATE FUNCTION ${s}.audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.leaf := ${s}.audit_leaf(NEW.position, NEW.stream, NEW.revision, NEW.type, NEW.data::text, NEW.metadata::text);
  RETURN NEW;
END $$;
CREATE TRIGGER audit_row BEFORE INSERT ON ${s}.events FOR EACH ROW EXECUTE FUNCTION ${s}.audit_row();

-- Append the leaves in position order to the tree of (n, f); each carry merges two equal subtrees.
CREATE FUNCTION ${s}.audit_fold(leaves bytea[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  n bigint; f bytea[]; leaf bytea; carry bytea; lvl int; rest bigint; r bytea;
BEGIN
  SELECT size, frontier INTO n, f FROM ${s}.audit_head;
  FOREACH leaf IN ARRAY leaves LOOP
    carry := leaf; lvl := 1; rest := n;
    WHILE rest % 2 = 1 LOOP
      carry := sha256('\\x01'::bytea || f[lvl] || carry);
      f[lvl] := NULL; lvl := lvl + 1; rest := rest / 2;
    END LOOP;
    f[lvl] := carry; n := n + 1;
  END LOOP;
  FOR i IN 1 .. coalesce(array_upper(f, 1), 0) LOOP
    IF f[i] IS NOT NULL THEN
      r := CASE WHEN r IS NULL THEN f[i] ELSE sha256('\\x01'::bytea || f[i] || r) END;
    END IF;
  END LOOP;
  UPDATE ${s}.audit_head SET size = n, frontier = f, root = coalesce(r, sha256(''::bytea));
END $$;
CREATE FUNCTION ${s}.audit_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ${s}.audit_fold(ARRAY(SELECT leaf FROM appended ORDER BY position));
  RETURN NULL;
END $$;
CREATE TRIGGER audit_statement AFTER INSERT ON ${s}.events REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION ${s}.audit_statement();

-- The events stored before the tree: their leaves, then the tree over them in position order.
UPDATE ${s}.events SET leaf = ${s}.audit_leaf(position, stream, revision, type, data::text, metadata::text);
SELECT ${s}.audit_fold(ARRAY(SELECT leaf FROM ${s}.events ORDER BY position));
`;

/** readStored: the bytes as stored (json keeps the text it was given), and the leaf beside them. */
export const readStoredSql = (s: string): string =>
  `SELECT position, id::text, stream, revision, type, convert_to(data::text, 'UTF8'), convert_to(metadata::text, 'UTF8'), leaf ` +
  `FROM ${s}.events WHERE position > $1 ORDER BY position LIMIT $2`;

export const auditHeadSql = (s: string): string => `SELECT size, root, dense_from FROM ${s}.audit_head`;
