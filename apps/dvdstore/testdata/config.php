<?php
// Written by nearnative: the database as this web server sees it.
const DS_DSN = 'host=172.17.0.3 port=41234 dbname=ds2 user=postgres connect_timeout=10';
