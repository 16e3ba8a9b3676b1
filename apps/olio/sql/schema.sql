-- Olio's tables (person, address, socialevent, tags with reference counts,
-- event-tag links, attendees, friends, comments with ratings), as MariaDB
-- InnoDB tables. Only primary keys here: the loader adds the secondary
-- indexes (indexes.sql) after the bulk load.

CREATE TABLE address (
  addressid INT NOT NULL AUTO_INCREMENT,
  street1 VARCHAR(55) NOT NULL,
  street2 VARCHAR(55) NOT NULL DEFAULT '',
  city VARCHAR(55) NOT NULL,
  state VARCHAR(25) NOT NULL,
  zip VARCHAR(12) NOT NULL,
  country VARCHAR(55) NOT NULL,
  latitude DECIMAL(14,10) NOT NULL,
  longitude DECIMAL(14,10) NOT NULL,
  PRIMARY KEY (addressid)
) ENGINE=InnoDB;

CREATE TABLE person (
  userid INT NOT NULL AUTO_INCREMENT,
  username VARCHAR(25) NOT NULL,
  password VARCHAR(25) NOT NULL,
  firstname VARCHAR(25) NOT NULL,
  lastname VARCHAR(25) NOT NULL,
  email VARCHAR(90) NOT NULL,
  telephone VARCHAR(25) NOT NULL,
  imageurl VARCHAR(100) NOT NULL,
  imagethumburl VARCHAR(100) NOT NULL,
  summary VARCHAR(2500) NOT NULL,
  timezone VARCHAR(100) NOT NULL,
  address_addressid INT NOT NULL,
  PRIMARY KEY (userid)
) ENGINE=InnoDB;

-- Friends: one row per (person, friend), as Olio's PERSON_PERSON.
CREATE TABLE person_person (
  person_userid INT NOT NULL,
  friends_userid INT NOT NULL,
  is_accepted TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (person_userid, friends_userid)
) ENGINE=InnoDB;

CREATE TABLE socialevent (
  socialeventid INT NOT NULL AUTO_INCREMENT,
  title VARCHAR(100) NOT NULL,
  description VARCHAR(500) NOT NULL,
  submittername VARCHAR(25) NOT NULL,
  imageurl VARCHAR(100) NOT NULL,
  imagethumburl VARCHAR(100) NOT NULL,
  literatureurl VARCHAR(100) NOT NULL,
  telephone VARCHAR(25) NOT NULL,
  timezone VARCHAR(100) NOT NULL,
  eventtimestamp DATETIME NOT NULL,
  eventdate DATE NOT NULL,
  summary VARCHAR(100) NOT NULL,
  createdtimestamp DATETIME NOT NULL,
  address_addressid INT NOT NULL,
  totalscore INT NOT NULL DEFAULT 0,
  numberofvotes INT NOT NULL DEFAULT 0,
  PRIMARY KEY (socialeventid)
) ENGINE=InnoDB;

CREATE TABLE socialeventtag (
  socialeventtagid INT NOT NULL AUTO_INCREMENT,
  tag VARCHAR(50) NOT NULL,
  refcount INT NOT NULL DEFAULT 0,
  PRIMARY KEY (socialeventtagid)
) ENGINE=InnoDB;

CREATE TABLE socialeventtag_socialevent (
  socialeventtagid INT NOT NULL,
  socialeventid INT NOT NULL,
  PRIMARY KEY (socialeventtagid, socialeventid)
) ENGINE=InnoDB;

-- Attendees: Olio keys them by user name.
CREATE TABLE person_socialevent (
  socialeventid INT NOT NULL,
  username VARCHAR(25) NOT NULL,
  PRIMARY KEY (socialeventid, username)
) ENGINE=InnoDB;

CREATE TABLE comments_rating (
  commentid INT NOT NULL AUTO_INCREMENT,
  username VARCHAR(25) NOT NULL,
  socialeventid INT NOT NULL,
  comments TEXT NOT NULL,
  ratings INT NOT NULL,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  PRIMARY KEY (commentid)
) ENGINE=InnoDB;
