-- A HERMES_HOME/state.db written by the schema of version 8 (migrations 1..8: rooms in room_events, rooms.replication_json), dumped as SQL.
-- Its rooms: led here, a disbanded room, a replica with a preserved branch and a demotion (rows of the version-5 store, carried
-- into the version-8 schema), and two quorum rooms the version-8 RoomsStore wrote: one led here, one followed here.
CREATE TABLE messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'notification')),
        content TEXT NOT NULL,
        meta_json TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      );
CREATE TABLE gateway_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
INSERT INTO gateway_meta VALUES('rooms_sync_barrier','2026-11-01T12:00:54.000Z');
INSERT INTO gateway_meta VALUES('rooms_max_epoch','2');
CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        profile_name TEXT NOT NULL,
        title TEXT NOT NULL,
        kind TEXT NOT NULL,
        origin_json TEXT NOT NULL,
        model_override TEXT,
        provider_override TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
CREATE TABLE gateway_routing (
        routing_key TEXT NOT NULL,
        entry_json TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
CREATE TABLE gateway_heartbeats (
        profile TEXT PRIMARY KEY,
        gateway_id TEXT NOT NULL,
        pid INTEGER NOT NULL,
        state TEXT NOT NULL,
        last_seen_at TEXT NOT NULL
      );
CREATE TABLE delivery_obligations (
        obligation_id TEXT PRIMARY KEY,
        adapter_profile TEXT NOT NULL,
        session_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'abandoned')),
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
CREATE TABLE profile_aliases (
        alias TEXT PRIMARY KEY,
        profile_name TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
CREATE TABLE rooms (
        room_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        members_json TEXT NOT NULL,
        authority_gateway_id TEXT NOT NULL,
        authority_epoch INTEGER NOT NULL CHECK (authority_epoch >= 0),
        next_seq INTEGER NOT NULL CHECK (next_seq >= 1),
        revision INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        disbanded_at TEXT,
        fenced_by_epoch INTEGER,
        fenced_by_gateway_id TEXT,
        max_epoch_seen INTEGER NOT NULL,
        last_hash TEXT NOT NULL,
        replica_last_seq INTEGER,
        replica_latest_seq INTEGER,
        safety_status TEXT NOT NULL CHECK (safety_status IN ('passive', 'fenced', 'diverged', 'quarantined')),
        safety_reason TEXT,
        replica_source_json TEXT
      , replication_json TEXT);
INSERT INTO rooms VALUES('led','Led, renamed','[{"member_id":"alice","profile":"alice","gateway_id":"gw-a"},{"member_id":"bob","profile":"bob","gateway_id":"gw-b"}]','gw-a',1,45,2,'2026-11-01T12:00:00.000Z','2026-11-01T12:00:16.000Z',NULL,NULL,NULL,1,'77636641506ed5755cc5be4cda88fb1e50e2ebb75226ec1a6e63689cb6675b71',NULL,NULL,'passive',NULL,NULL,NULL);
INSERT INTO rooms VALUES('gone','Gone','[{"member_id":"alice","profile":"alice","gateway_id":"gw-a"},{"member_id":"bob","profile":"bob","gateway_id":"gw-b"}]','gw-a',1,5,2,'2026-11-01T12:00:17.000Z','2026-11-01T12:00:22.000Z','2026-11-01T12:00:20.000Z',NULL,NULL,1,'15107ca8b061038769093ffec081eade8c651d92be0b229d4a67117ccb780ee2',NULL,NULL,'passive',NULL,NULL,NULL);
INSERT INTO rooms VALUES('copy','Copy','[{"gateway_id":"gw-z","member_id":"alice","profile":"alice"},{"gateway_id":"gw-b","member_id":"bob","profile":"bob"}]','gw-y',3,16,1,'2026-11-01T12:00:23.000Z','2026-11-01T12:01:08.000Z',NULL,NULL,NULL,3,'68ccd823ae7d2d652eeaef378e474e21e870baf5bfb4b78e94fec4c9d75400dc',15,15,'diverged','diverged: 3 events from seq 12 of gw-a@2 preserved; gw-y@3 won','{"peer":"yhost"}',NULL);
INSERT INTO rooms VALUES('quorum-led','Quorum led','[{"member_id":"alice","profile":"alice","gateway_id":"gw-a"},{"member_id":"bob","profile":"bob","gateway_id":"gw-b"}]','gw-a',1,6,1,'2026-11-02T09:00:01.000Z','2026-11-02T09:00:05.000Z',NULL,NULL,NULL,1,'f98a4322cc3c45396f5d1d867f6dd4161fcc0a0d191cf57dd6f22d4627767f1a',NULL,NULL,'passive',NULL,NULL,'{"mode":"quorum","replicas":["gw-a","gw-b","gw-c"],"min_insync":2}');
INSERT INTO rooms VALUES('quorum-copy','Quorum copy','[{"gateway_id":"gw-q","member_id":"carol","profile":"carol"},{"gateway_id":"gw-a","member_id":"alice","profile":"alice"}]','gw-q',1,4,1,'2026-11-02T09:00:06.000Z','2026-11-02T09:00:13.000Z',NULL,NULL,NULL,1,'c96e3c7b5678554a391416b8540e64430430e63efbd330db0374be6672dd71af',3,3,'passive',NULL,'{"peer":"qhost"}','{"mode":"quorum","replicas":["gw-q","gw-a","gw-b"],"min_insync":1}');
CREATE TABLE room_events (
        room_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor_json TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (room_id, seq),
        UNIQUE (room_id, event_id)
      );
INSERT INTO room_events VALUES('led',1,'system:room-created','room.created','{"id":"room-control","kind":"system"}',1,'{"members":[{"gateway_id":"gw-a","member_id":"alice","profile":"alice"},{"gateway_id":"gw-b","member_id":"bob","profile":"bob"}],"name":"Led here"}','2026-11-01T12:00:00.000Z','19aeed2c2199bdaba7a50e401c5e52f5e297927ef20c2c331aee58f5d5da9b0f');
INSERT INTO room_events VALUES('led',2,'m-0','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #0","thread_id":"t1"}','2026-11-01T12:00:01.000Z','f0d34e70cb182daca8c550977d31d060100750c3c9716681ec879de9de51e406');
INSERT INTO room_events VALUES('led',3,'m-1','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #1"}','2026-11-01T12:00:01.000Z','0c63bb4e21a0e2e1c4d252cd63db8d7f672e60f2d1be9a24215ffebfb11d80ae');
INSERT INTO room_events VALUES('led',4,'m-2','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #2"}','2026-11-01T12:00:01.000Z','0b330417a3a7e5b0f974acb91f5bf408dcb434ab2917709ae2d5189084811668');
INSERT INTO room_events VALUES('led',5,'m-3','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #3"}','2026-11-01T12:00:01.000Z','9d8cd3ffb7c27ff92d5d37508d2c1227fdff43150a527e1d9d891a396d85b40d');
INSERT INTO room_events VALUES('led',6,'m-4','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #4"}','2026-11-01T12:00:01.000Z','ac5849ec12a074e346b894b4391a89a4e82b46b539bc84854759653acd45b623');
INSERT INTO room_events VALUES('led',7,'m-5','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #5","thread_id":"t1"}','2026-11-01T12:00:01.000Z','cef1a9b3f52ff3dc783f80c04ec72e295212232d5cbd69f9f55da7e038f3d041');
INSERT INTO room_events VALUES('led',8,'m-6','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #6"}','2026-11-01T12:00:01.000Z','d5aca193217d972cb6e09d6f683989ee9e112b4cd655ed33159fb07c7177106d');
INSERT INTO room_events VALUES('led',9,'m-7','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #7"}','2026-11-01T12:00:01.000Z','a5c9d4f6e4c433501ab8e66914e4845e840bf0dfc7a900f8650f9776e2ee4771');
INSERT INTO room_events VALUES('led',10,'m-8','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #8"}','2026-11-01T12:00:03.000Z','04d2283e4fd42012ff3ed725507da651d5347ccc16ce3e57cd01b835f73c243a');
INSERT INTO room_events VALUES('led',11,'m-9','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #9"}','2026-11-01T12:00:03.000Z','bdfaaedd0f0ce899f39c5239470b1b934f2d9f990ce4f3a3a7647170a42726d3');
INSERT INTO room_events VALUES('led',12,'m-10','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #10","thread_id":"t1"}','2026-11-01T12:00:03.000Z','3529a667580abca2fd270caf4b5f6a1ce60f0d4dd3202a073f7f102ab1e25c88');
INSERT INTO room_events VALUES('led',13,'m-11','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #11"}','2026-11-01T12:00:03.000Z','5829d54090249c5476ea99c331a1552daeaeb8532874b16c6e8e9b614feda03b');
INSERT INTO room_events VALUES('led',14,'m-12','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #12"}','2026-11-01T12:00:03.000Z','70d0e135d71f4e238d793602ace2d2849d14a56cf4c2dc8d7a70e691960de1dd');
INSERT INTO room_events VALUES('led',15,'m-13','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #13"}','2026-11-01T12:00:03.000Z','f405633ea2231167d2fd7c10606c88f2fcc5ee0c3a3d1c8169402352b0e7a74c');
INSERT INTO room_events VALUES('led',16,'m-14','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #14"}','2026-11-01T12:00:03.000Z','6474d13b789f8a5639be7c6985e3bbce0bd2e31dbca99158a5c9cf836b38a10e');
INSERT INTO room_events VALUES('led',17,'m-15','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #15","thread_id":"t1"}','2026-11-01T12:00:03.000Z','0c229c3ec782b58d0d54db0d76ca6b940c688360173220dce15c274b4df3c0d7');
INSERT INTO room_events VALUES('led',18,'m-16','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #16"}','2026-11-01T12:00:05.000Z','1e7a9e909cdf3c3c31552bb5abd1d800024921eeda75a66077ca709d2e57f3d6');
INSERT INTO room_events VALUES('led',19,'m-17','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #17"}','2026-11-01T12:00:05.000Z','3107938b330a854fdfcf0348b541d9b5f1856cf0df64f83020aedc05c6e984e4');
INSERT INTO room_events VALUES('led',20,'m-18','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #18"}','2026-11-01T12:00:05.000Z','a644a48c766044100cad39e20bc86c860b9a8ae37cf33fbcbdceadcd60a3732c');
INSERT INTO room_events VALUES('led',21,'m-19','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #19"}','2026-11-01T12:00:05.000Z','f84327067edd43508802e6cf0004cf5d1c2dcba05681ba3958c979ffcb3db1ae');
INSERT INTO room_events VALUES('led',22,'m-20','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #20","thread_id":"t1"}','2026-11-01T12:00:05.000Z','70b9473e7ef159ec60a853e4859f88d2daa522ddda71331515f6d71f2422c04c');
INSERT INTO room_events VALUES('led',23,'m-21','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #21"}','2026-11-01T12:00:05.000Z','3bbfae1e2baed67f57492f0d40d0a98cd1c1bab2b3fb8a5b6f3a2af19fa188c2');
INSERT INTO room_events VALUES('led',24,'m-22','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #22"}','2026-11-01T12:00:05.000Z','67f3b2d1028c8943374a8c97af06e617d21b0b0d6a6b0240ebc38738321fbfac');
INSERT INTO room_events VALUES('led',25,'m-23','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #23"}','2026-11-01T12:00:05.000Z','92609a866e4c27f42105475c3c155c7543155d9486ba689e8de2d11bda8b3b9c');
INSERT INTO room_events VALUES('led',26,'m-24','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #24"}','2026-11-01T12:00:07.000Z','7e7d33c45b4b83a3aeb8345ee7c6f1463f7920a4a7a08e53f84094976c82f1b1');
INSERT INTO room_events VALUES('led',27,'m-25','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #25","thread_id":"t1"}','2026-11-01T12:00:07.000Z','96bc127d7e32862dd8597b431ef725a666f5340047ef7f6d27e7bd9170dbed44');
INSERT INTO room_events VALUES('led',28,'m-26','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #26"}','2026-11-01T12:00:07.000Z','8a44f25ec0fdf43a754dcce567aeb604d1ce6512080fc2dcf272fd62ffa91d49');
INSERT INTO room_events VALUES('led',29,'m-27','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #27"}','2026-11-01T12:00:07.000Z','6e55fb436da809bd675246122d5cda534dea3cfb52926cb6d3aa34da77e57e2f');
INSERT INTO room_events VALUES('led',30,'m-28','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #28"}','2026-11-01T12:00:07.000Z','2a4f0f43442cfcab75d1a0454f640a868e0dbfdf9471705f37d31d5b9e5aa2ff');
INSERT INTO room_events VALUES('led',31,'m-29','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #29"}','2026-11-01T12:00:07.000Z','393e9597fc2d8d5dc8e6a60227398526acf076796bbc33c76f20548c1d05e730');
INSERT INTO room_events VALUES('led',32,'m-30','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #30","thread_id":"t1"}','2026-11-01T12:00:07.000Z','5c6df41f2a6eda7be26b960d57ad343feb6c5d3e64a70c1e9b685019b2745b51');
INSERT INTO room_events VALUES('led',33,'m-31','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #31"}','2026-11-01T12:00:07.000Z','0b5130e2e0418178825e8a46c226a0801371ecd883cac6105b75671fe680e4df');
INSERT INTO room_events VALUES('led',34,'m-32','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #32"}','2026-11-01T12:00:09.000Z','d3892190c9ef2dabbf00ce87980ef361164e78302bbd751df37e5bf65e9cd1c4');
INSERT INTO room_events VALUES('led',35,'m-33','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #33"}','2026-11-01T12:00:09.000Z','abcc0c6c34e7f5d8f76273a29f2e8ed4caa10f8ad150ab4eec4d8400d379a0a4');
INSERT INTO room_events VALUES('led',36,'m-34','message.user','{"id":"user","kind":"user"}',1,'{"text":"</script> #34"}','2026-11-01T12:00:09.000Z','d5d9ffa62d59c3624f0e345512a24572f3fcfe2ede43bc80fa30d56e807f2528');
INSERT INTO room_events VALUES('led',37,'m-35','message.user','{"id":"user","kind":"user"}',1,'{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx #35","thread_id":"t1"}','2026-11-01T12:00:09.000Z','f35d075f43107b43e6a87837f72f6bb6518ac5f984fd6856f467353fc68d17d3');
INSERT INTO room_events VALUES('led',38,'m-36','message.user','{"id":"user","kind":"user"}',1,'{"text":"say \"hi\" \\ bye #36"}','2026-11-01T12:00:09.000Z','95eef458765665df4d1725f2b979dd38de0c40f9f5c08a5d2d19cd03be4f3ce0');
INSERT INTO room_events VALUES('led',39,'m-37','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünïcödé 日本語 😀 #37"}','2026-11-01T12:00:09.000Z','4a65aba6cb9e8ce1bb3023c098aa7ec95c75c57efd22fae36f8d6c36b50e17b6');
INSERT INTO room_events VALUES('led',40,'m-38','message.user','{"id":"user","kind":"user"}',1,'{"text":"seps    nbsp   #38"}','2026-11-01T12:00:09.000Z','4c7027b335aedde2cd3ef6dedde3d3808829384b35cb03c0ca460ba27b244c90');
INSERT INTO room_events VALUES('led',41,'m-39','message.user','{"id":"user","kind":"user"}',1,'{"text":"c0 \u0001\t\n end #39"}','2026-11-01T12:00:09.000Z','925cfb79a91190fb21ec514fbbe8027984c933015b6984c61ecd8941f4c69c4d');
INSERT INTO room_events VALUES('led',42,'system:room-renamed:0001','room.renamed','{"id":"room-control","kind":"system"}',1,'{"name":"Led, renamed"}','2026-11-01T12:00:11.000Z','dfa5aced4506be05ff145a82cc70c2ea0c039187c5acafe2b7c33c38f986cd38');
INSERT INTO room_events VALUES('led',43,'turn:d2.r0.p0.s2.mabc:message','message.member','{"id":"alice","kind":"member","profile":"alice"}',1,'{"text":"member says hi"}','2026-11-01T12:00:13.000Z','66d9a75b9fa4d95e717a0c5af6f5d0674e01170c6737b45db236a174ede06b63');
INSERT INTO room_events VALUES('led',44,'after-rename','message.user','{"id":"user","kind":"user"}',1,'{"text":"after"}','2026-11-01T12:00:15.000Z','77636641506ed5755cc5be4cda88fb1e50e2ebb75226ec1a6e63689cb6675b71');
INSERT INTO room_events VALUES('gone',1,'system:room-created','room.created','{"id":"room-control","kind":"system"}',1,'{"members":[{"gateway_id":"gw-a","member_id":"alice","profile":"alice"},{"gateway_id":"gw-b","member_id":"bob","profile":"bob"}],"name":"Gone"}','2026-11-01T12:00:17.000Z','5bb6934e45986e9a8443c2f570af28d5b968e4122dc6cec2fc199f45e43f66b4');
INSERT INTO room_events VALUES('gone',2,'g1','message.user','{"id":"user","kind":"user"}',1,'{"text":"one"}','2026-11-01T12:00:18.000Z','990f288d204f65f51525c3dd50b8b99ae249a35953756c8d3990dd89206da2bd');
INSERT INTO room_events VALUES('gone',3,'g2','message.user','{"id":"user","kind":"user"}',1,'{"text":"two"}','2026-11-01T12:00:18.000Z','94419a509f589535e204daaf077318dbe94216b12dd45b25946a5965c4cec5d7');
INSERT INTO room_events VALUES('gone',4,'system:room-disbanded','room.disbanded','{"id":"room-control","kind":"system"}',1,'{}','2026-11-01T12:00:20.000Z','15107ca8b061038769093ffec081eade8c651d92be0b229d4a67117ccb780ee2');
INSERT INTO room_events VALUES('copy',1,'system:room-created','room.created','{"id":"room-control","kind":"system"}',1,'{"members":[{"gateway_id":"gw-z","member_id":"alice","profile":"alice"},{"gateway_id":"gw-b","member_id":"bob","profile":"bob"}],"name":"Copy"}','2026-11-01T12:00:23.000Z','89c3b1d4c93e30bb7818555365f8cb39afc9c281abbb0c370b105e37daa04eb6');
INSERT INTO room_events VALUES('copy',2,'c-0','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 0"}','2026-11-01T12:00:24.000Z','7968a83e66ee41d10fde16357ce70d2eef0151e61e0c905984f8abe94c70e95e');
INSERT INTO room_events VALUES('copy',3,'c-1','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 1"}','2026-11-01T12:00:26.000Z','19fcef0368df8a75c2ffc69542eb10a8a640f543c756233011148801cbe8abb8');
INSERT INTO room_events VALUES('copy',4,'c-2','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 2"}','2026-11-01T12:00:28.000Z','3ac9c3f530046e2b01a142dcc6f5b36ffebbb9fa6d1485d9800d4b5f67745439');
INSERT INTO room_events VALUES('copy',5,'c-3','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 3"}','2026-11-01T12:00:30.000Z','933674a3d8b4e0168b3d6eb2001f03d610919d60ab1ab71b03a05d81aaecce39');
INSERT INTO room_events VALUES('copy',6,'c-4','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 4"}','2026-11-01T12:00:32.000Z','5c6555e522fe2531a8e1185ee37a49a0329a68fb88f225c618ebb5c341e01468');
INSERT INTO room_events VALUES('copy',7,'c-5','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 5"}','2026-11-01T12:00:34.000Z','4060e1e5e49890401c7dec9b0f0884fedcaebadbdccad3538c10a4afc090274a');
INSERT INTO room_events VALUES('copy',8,'c-6','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 6"}','2026-11-01T12:00:36.000Z','e760a489677d0e4fe1776942fa1756f8d76410c58c6970c8ebeeb7c9e56c4584');
INSERT INTO room_events VALUES('copy',9,'c-7','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 7"}','2026-11-01T12:00:38.000Z','2e4c59b2b993383f1c4e7fa1842ac2fc1dc660052d6483f721e5ecae4273fbfb');
INSERT INTO room_events VALUES('copy',10,'c-8','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 8"}','2026-11-01T12:00:40.000Z','09cda3f51b22b76d40dfaea90b524d7e42a996b1b9c2e7450bb0fc262140d027');
INSERT INTO room_events VALUES('copy',11,'c-9','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy 9"}','2026-11-01T12:00:42.000Z','cd1305f9f3cc7d7385cec77a42c39cf2bef91f0581e7e28c7ef1119603523255');
INSERT INTO room_events VALUES('copy',12,'system:authority-claimed:3','authority.claimed','{"id":"authority-control","kind":"system"}',3,'{"authority_epoch":3,"authority_gateway_id":"gw-y","previous_gateway_id":"gw-z","promoted_from_replica":true,"reason":"authority-unreachable"}','2026-11-01T12:00:59.000Z','bdc79184f979aa89d2580cd83d16f4dbef987f9711f43ff1d76423f2a6e55ce1');
INSERT INTO room_events VALUES('copy',13,'y-1','message.user','{"id":"user","kind":"user"}',3,'{"text":"won 1"}','2026-11-01T12:01:01.000Z','e1da5290647fa575a00ec4572365e70e5ccf55a0ee48f334039b0edcdc65d775');
INSERT INTO room_events VALUES('copy',14,'y-2','message.user','{"id":"user","kind":"user"}',3,'{"text":"won 2"}','2026-11-01T12:01:01.000Z','4dc7c9bcf002655866550fbb7f3063d36c09e5b29d7f8fd562dfa42d91222cc0');
INSERT INTO room_events VALUES('copy',15,'y-3','message.user','{"id":"user","kind":"user"}',3,'{"text":"won 3"}','2026-11-01T12:01:01.000Z','68ccd823ae7d2d652eeaef378e474e21e870baf5bfb4b78e94fec4c9d75400dc');
INSERT INTO room_events VALUES('quorum-led',1,'system:room-created','room.created','{"id":"room-control","kind":"system"}',1,'{"members":[{"gateway_id":"gw-a","member_id":"alice","profile":"alice"},{"gateway_id":"gw-b","member_id":"bob","profile":"bob"}],"name":"Quorum led"}','2026-11-02T09:00:01.000Z','ff920f78e5eb3380a4099bce7c6b32606b82da02390663b4747010bf30a1d922');
INSERT INTO room_events VALUES('quorum-led',2,'q-0','message.user','{"id":"user","kind":"user"}',1,'{"text":"quorum \"zero\""}','2026-11-02T09:00:02.000Z','172a880266344648aca652d5387c6d287460dad6092c04b91938a97ea79b504d');
INSERT INTO room_events VALUES('quorum-led',3,'q-1','message.user','{"id":"user","kind":"user"}',1,'{"text":"ünï 😀"}','2026-11-02T09:00:02.000Z','f222149a710d67ddca41080ef099da8f483fdb924676a2829854df2327cfb73c');
INSERT INTO room_events VALUES('quorum-led',4,'q-2','message.user','{"id":"user","kind":"user"}',1,'{"text":"two"}','2026-11-02T09:00:02.000Z','4a2e75ec1927d89695d764d1c206aec1dc82f942a059536738a2044ce20ab0ba');
INSERT INTO room_events VALUES('quorum-led',5,'q-3','message.user','{"id":"user","kind":"user"}',1,'{"text":"three"}','2026-11-02T09:00:04.000Z','f98a4322cc3c45396f5d1d867f6dd4161fcc0a0d191cf57dd6f22d4627767f1a');
INSERT INTO room_events VALUES('quorum-copy',1,'system:room-created','room.created','{"id":"room-control","kind":"system"}',1,'{"members":[{"gateway_id":"gw-q","member_id":"carol","profile":"carol"},{"gateway_id":"gw-a","member_id":"alice","profile":"alice"}],"name":"Quorum copy"}','2026-11-02T09:00:06.000Z','27d0c37253fe34e43dff9a4be019e9a76ed449c8943e365f49321a79213f5c6d');
INSERT INTO room_events VALUES('quorum-copy',2,'qc-0','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy zero"}','2026-11-02T09:00:07.000Z','b803f91aecd233854ef6920dcb590fe553f7af95ccd50af0724fbd7f1a5dd3b7');
INSERT INTO room_events VALUES('quorum-copy',3,'qc-1','message.user','{"id":"user","kind":"user"}',1,'{"text":"copy one"}','2026-11-02T09:00:07.000Z','c96e3c7b5678554a391416b8540e64430430e63efbd330db0374be6672dd71af');
CREATE TABLE room_lineage (
        room_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        gateway_id TEXT NOT NULL,
        start_seq INTEGER NOT NULL,
        PRIMARY KEY (room_id, epoch)
      );
INSERT INTO room_lineage VALUES('led',1,'gw-a',1);
INSERT INTO room_lineage VALUES('gone',1,'gw-a',1);
INSERT INTO room_lineage VALUES('copy',1,'gw-z',1);
INSERT INTO room_lineage VALUES('copy',3,'gw-y',12);
INSERT INTO room_lineage VALUES('quorum-led',1,'gw-a',1);
INSERT INTO room_lineage VALUES('quorum-copy',1,'gw-q',1);
CREATE TABLE room_members (
        room_id TEXT NOT NULL,
        member_id TEXT NOT NULL,
        profile TEXT NOT NULL,
        PRIMARY KEY (room_id, member_id)
      );
INSERT INTO room_members VALUES('led','alice','alice');
INSERT INTO room_members VALUES('gone','alice','alice');
INSERT INTO room_members VALUES('quorum-led','alice','alice');
INSERT INTO room_members VALUES('quorum-copy','alice','alice');
CREATE TABLE room_retired_ids (
        room_id TEXT PRIMARY KEY,
        retired_at TEXT NOT NULL
      );
INSERT INTO room_retired_ids VALUES('gone','2026-11-01T12:00:21.000Z');
CREATE TABLE room_divergences (
        divergence_id INTEGER PRIMARY KEY AUTOINCREMENT,
        room_id TEXT NOT NULL,
        detected_at TEXT NOT NULL,
        from_seq INTEGER NOT NULL,
        branch_epoch INTEGER NOT NULL,
        branch_gateway_id TEXT NOT NULL,
        winning_epoch INTEGER NOT NULL,
        winning_gateway_id TEXT NOT NULL,
        count INTEGER NOT NULL,
        markers_only INTEGER NOT NULL
      );
INSERT INTO room_divergences VALUES(1,'copy','2026-11-01T12:01:07.000Z',12,2,'gw-a',3,'gw-y',3,0);
CREATE TABLE room_divergent_events (
        divergence_id INTEGER NOT NULL REFERENCES room_divergences(divergence_id),
        room_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor_json TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        payload_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (divergence_id, seq)
      );
INSERT INTO room_divergent_events VALUES(1,'copy',12,'system:authority-claimed:2','authority.claimed','{"id":"authority-control","kind":"system"}',2,'{"authority_epoch":2,"authority_gateway_id":"gw-a","previous_gateway_id":"gw-z","promoted_from_replica":true,"reason":"authority-unreachable"}','2026-11-01T12:00:55.000Z','63d29dcfb782060f25def36203df9eef03930d09140b5288ef5db8512db82773');
INSERT INTO room_divergent_events VALUES(1,'copy',13,'a-only-1','message.user','{"id":"user","kind":"user"}',2,'{"text":"lost 1"}','2026-11-01T12:00:57.000Z','017b8d54f5155548d57b080418ff181e6f30c6b7bc3c434e84750dd0f9c909a2');
INSERT INTO room_divergent_events VALUES(1,'copy',14,'a-only-2','message.user','{"id":"user","kind":"user"}',2,'{"text":"lost 2"}','2026-11-01T12:00:57.000Z','e0a2e108bea43c89da6876978ad02c79e9e757a2c9b7f43ae6fb041c4a0638eb');
CREATE TABLE delivery_outbox (
        delivery_id TEXT PRIMARY KEY,
        from_profile TEXT NOT NULL,
        from_gateway TEXT NOT NULL,
        sender_session_key TEXT NOT NULL,
        target TEXT NOT NULL,
        route_kind TEXT NOT NULL CHECK (route_kind IN ('local', 'peer', 'relay')),
        route_json TEXT NOT NULL,
        target_profile TEXT,
        message TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'settled', 'failed', 'cancelled', 'expired', 'ambiguous')),
        reason TEXT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        settled_at TEXT,
        reply TEXT,
        compact INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL,
        notified_at TEXT
      );
CREATE TABLE delivery_ingress (
        delivery_id TEXT PRIMARY KEY,
        sender TEXT NOT NULL,
        sender_name TEXT NOT NULL,
        target TEXT NOT NULL,
        target_profile TEXT NOT NULL,
        session_key TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('local', 'peer', 'relay')),
        message TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'settled', 'failed', 'cancelled', 'expired', 'ambiguous')),
        reason TEXT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        claimed_at TEXT,
        settled_at TEXT,
        reply TEXT,
        compact INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL
      );
CREATE TABLE peer_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('dm', 'run')),
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled', 'interrupted')),
        profile TEXT NOT NULL,
        session_id TEXT NOT NULL,
        sender_profile TEXT NOT NULL,
        sender_gateway TEXT NOT NULL,
        sender_name TEXT NOT NULL,
        input TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        idempotency_scope TEXT NOT NULL,
        idempotency_key TEXT,
        reply TEXT,
        reason TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        ended_at TEXT,
        updated_at TEXT NOT NULL
      );
CREATE TABLE room_demotions (
        room_id TEXT NOT NULL,
        demoted_at TEXT NOT NULL,
        previous_gateway_id TEXT NOT NULL,
        previous_epoch INTEGER NOT NULL,
        authority_gateway_id TEXT NOT NULL,
        authority_epoch INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        PRIMARY KEY (room_id, authority_epoch)
      );
INSERT INTO room_demotions VALUES('copy','2026-11-01T12:01:04.000Z','gw-a',2,'gw-y',3,14);
CREATE TABLE telegram_offsets (
        bot_id TEXT PRIMARY KEY,
        next_offset INTEGER NOT NULL,
        updated_at TEXT NOT NULL
      );
CREATE TABLE telegram_inbox (
        bot_id TEXT NOT NULL,
        update_id INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'replying')),
        work_json TEXT NOT NULL,
        reply_text TEXT,
        sent_parts INTEGER NOT NULL DEFAULT 0,
        received_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (bot_id, update_id)
      );
CREATE TABLE telegram_topics (
        profile TEXT NOT NULL,
        bot_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        topic_id TEXT NOT NULL,
        chat_type TEXT NOT NULL,
        session_key TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (profile, chat_id, topic_id)
      );
CREATE TABLE telegram_refused_chats (
        bot_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        refused_at TEXT NOT NULL,
        PRIMARY KEY (bot_id, chat_id)
      );
CREATE TABLE routines (
        routine_id TEXT PRIMARY KEY,
        profile TEXT NOT NULL,
        name TEXT NOT NULL,
        name_key TEXT NOT NULL,
        schedule TEXT NOT NULL,
        tz TEXT NOT NULL,
        prompt TEXT NOT NULL,
        misfire TEXT NOT NULL CHECK (misfire IN ('skip', 'run-once')),
        grace_seconds INTEGER NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        cursor_ms INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (profile, name_key)
      );
CREATE TABLE routine_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        routine_id TEXT NOT NULL REFERENCES routines(routine_id) ON DELETE CASCADE,
        profile TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'settled', 'failed', 'missed', 'skipped_overlap')),
        trigger TEXT CHECK (trigger IN ('schedule', 'catch_up', 'manual')),
        scheduled_for TEXT,
        started_at TEXT,
        ended_at TEXT,
        late_ms INTEGER,
        reason TEXT,
        error TEXT,
        reply TEXT,
        session_id TEXT,
        detail TEXT
      );
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('room_divergences',1);
CREATE UNIQUE INDEX sessions_by_key ON sessions(session_key);
CREATE INDEX sessions_by_profile ON sessions(profile_name);
CREATE UNIQUE INDEX gateway_routing_by_key ON gateway_routing(routing_key);
CREATE INDEX delivery_obligations_by_profile ON delivery_obligations(adapter_profile, state);
CREATE INDEX profile_aliases_by_profile ON profile_aliases(profile_name);
CREATE INDEX rooms_by_updated ON rooms(updated_at);
CREATE INDEX room_members_by_profile ON room_members(profile);
CREATE INDEX room_divergences_by_room ON room_divergences(room_id);
CREATE INDEX delivery_outbox_by_state ON delivery_outbox(state);
CREATE INDEX delivery_outbox_by_sender ON delivery_outbox(from_profile, created_at);
CREATE INDEX delivery_outbox_by_target ON delivery_outbox(target_profile);
CREATE INDEX delivery_outbox_unnotified ON delivery_outbox(notified_at) WHERE notified_at IS NULL;
CREATE INDEX delivery_ingress_by_state ON delivery_ingress(state);
CREATE INDEX delivery_ingress_by_target ON delivery_ingress(target_profile, created_at);
CREATE UNIQUE INDEX peer_runs_idempotency ON peer_runs(idempotency_scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX peer_runs_by_status ON peer_runs(status);
CREATE INDEX peer_runs_by_end ON peer_runs(ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX routine_runs_by_routine ON routine_runs(routine_id, id);
CREATE INDEX routine_runs_running ON routine_runs(state) WHERE state = 'running';
PRAGMA user_version = 8;
