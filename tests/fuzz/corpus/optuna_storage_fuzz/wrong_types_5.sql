BEGIN TRANSACTION;
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES('v3.0.0.d');
CREATE TABLE studies (
	study_id INTEGER NOT NULL, 
	study_name VARCHAR(512) NOT NULL, 
	PRIMARY KEY (study_id)
);
INSERT INTO "studies" VALUES(1,'tiny');
CREATE TABLE study_directions (
	study_direction_id INTEGER NOT NULL, 
	direction VARCHAR(8) NOT NULL, 
	study_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	PRIMARY KEY (study_direction_id), 
	UNIQUE (study_id, objective), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO "study_directions" VALUES(1,'MINIMIZE',1,0);
CREATE TABLE study_system_attributes (
	study_system_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_system_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE study_user_attributes (
	study_user_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_user_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE trial_heartbeats (
	trial_heartbeat_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	heartbeat DATETIME NOT NULL, 
	PRIMARY KEY (trial_heartbeat_id), 
	UNIQUE (trial_id), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE trial_intermediate_values (
	trial_intermediate_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	intermediate_value FLOAT, 
	intermediate_value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_intermediate_value_id), 
	UNIQUE (trial_id, step), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO "trial_intermediate_values" VALUES(1,1,1,0.417022004702574,'FINITE');
INSERT INTO "trial_intermediate_values" VALUES(2,1,2,0.834044009405148,'FINITE');
INSERT INTO "trial_intermediate_values" VALUES(3,2,1,1.46755890817113043844e-01,'FINITE');
INSERT INTO "trial_intermediate_values" VALUES(4,2,2,2.93511781634226087689e-01,'FINITE');
INSERT INTO "trial_intermediate_values" VALUES(5,3,1,3.96767474230669936474e-01,'FINITE');
INSERT INTO "trial_intermediate_values" VALUES(6,3,2,7.93534948461339872949e-01,'FINITE');
CREATE TABLE trial_params (
	param_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	param_name VARCHAR(512), 
	param_value FLOAT, 
	distribution_json TEXT, 
	PRIMARY KEY (param_id), 
	UNIQUE (trial_id, param_name), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO "trial_params" VALUES(1,1,'x',0.417022004702574,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}}');
INSERT INTO "trial_params" VALUES(2,1,'k',3.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 3}}');
INSERT INTO "trial_params" VALUES(3,1,'act',1.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["relu", "tanh"]}}');
INSERT INTO "trial_params" VALUES(4,1,'c',2.0,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 2.0, "high": 2.0, "log": false}}');
INSERT INTO "trial_params" VALUES(5,2,'x',1.46755890817113043844e-01,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}}');
INSERT INTO "trial_params" VALUES(6,2,'k',1.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 3}}');
INSERT INTO "trial_params" VALUES(7,2,'act',1.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["relu", "tanh"]}}');
INSERT INTO "trial_params" VALUES(8,2,'c',2.0,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 2.0, "high": 2.0, "log": false}}');
INSERT INTO "trial_params" VALUES(9,3,'x',3.96767474230669936474e-01,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}}');
INSERT INTO "trial_params" VALUES(10,3,'k',2.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 3}}');
INSERT INTO "trial_params" VALUES(11,3,'act',1.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["relu", "tanh"]}}');
INSERT INTO "trial_params" VALUES(12,3,'c',2.0,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 2.0, "high": 2.0, "log": false}}');
CREATE TABLE trial_system_attributes (
	trial_system_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_system_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO "trial_system_attributes" VALUES(1,4,'fixed_params','{"x": 0.5, "k": 2, "act": "relu"}');
CREATE TABLE trial_user_attributes (
	trial_user_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_user_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO "trial_user_attributes" VALUES(1,1,'note','"trial 0"');
INSERT INTO "trial_user_attributes" VALUES(2,2,'note','"trial 1"');
INSERT INTO "trial_user_attributes" VALUES(3,3,'note','"trial 2"');
CREATE TABLE trial_values (
	trial_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	value FLOAT, 
	value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_value_id), 
	UNIQUE (trial_id, objective), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO "trial_values" VALUES(1,1,0,3.41702200470257411168e+00,'FINITE');
INSERT INTO "trial_values" VALUES(2,2,0,1.14675589081711315486e+00,'FINITE');
INSERT INTO "trial_values" VALUES(3,3,0,2.39676747423067,'FINITE');
CREATE TABLE trials (
	trial_id INTEGER NOT NULL, 
	number INTEGER, 
	study_id INTEGER, 
	state VARCHAR(8) NOT NULL, 
	datetime_start DATETIME, 
	datetime_complete DATETIME, 
	PRIMARY KEY (trial_id), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO "trials" VALUES(1,0,1,'COMPLETE','2026-12-04 07:41:06.610843','2026-12-04 07:41:06.828482');
INSERT INTO "trials" VALUES(2,1,1,'COMPLETE','2026-12-04 07:41:06.889692','2026-12-04 07:41:07.010623');
INSERT INTO "trials" VALUES(3,2,1,'COMPLETE','2026-12-04 07:41:07.269202','2026-12-04 07:41:07.371124');
INSERT INTO "trials" VALUES(4,3,1,'WAITING',NULL,NULL);
CREATE TABLE version_info (
	version_info_id INTEGER NOT NULL, 
	schema_version INTEGER, 
	library_version VARCHAR(256), 
	PRIMARY KEY (version_info_id), 
	CHECK (version_info_id=1)
);
INSERT INTO "version_info" VALUES(1,12,'3.1.0');
CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name);
COMMIT;

UPDATE version_info SET schema_version = '12th';
